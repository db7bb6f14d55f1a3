//! The release workflow (`.github/workflows/release.yml`) cannot run here (no registry), so it is
//! held to what the local dry run (`scripts/release plan`, run by the end-to-end suite on the
//! images it built) proves: the same repositories, both platforms, an SBOM and provenance, keyless
//! signatures of every image and chart, and chart edits that really pin the digests — the lines
//! both of them rewrite exist exactly once in the charts.
#![allow(clippy::unwrap_used, clippy::expect_used)] // a test panics with its message

use std::path::{Path, PathBuf};

use serde_yaml::Value;

const REGISTRY: &str = "ghcr.io/hollo-social";

/// The values lines both the workflow and the dry run rewrite to pin the digests.
const OPERATOR_DIGEST_LINE: &str = "  digest: \"\"";
const HOLLO_IMAGE_LINE: &str = "  image: {repository: ghcr.io/hollo-social/hollo}";

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("the runtime crate sits in the repository")
        .to_path_buf()
}

fn read(path: &str) -> String {
    std::fs::read_to_string(repo().join(path)).unwrap_or_else(|e| panic!("{path}: {e}"))
}

fn workflow() -> Value {
    serde_yaml::from_str(&read(".github/workflows/release.yml")).expect("release.yml parses")
}

/// Every `run:` script and `with:` value of a job, as one text.
fn job_text(wf: &Value, job: &str) -> String {
    let steps = wf["jobs"][job]["steps"]
        .as_sequence()
        .unwrap_or_else(|| panic!("job {job} has steps"));
    steps
        .iter()
        .map(|s| serde_yaml::to_string(s).expect("a step serializes"))
        .collect()
}

#[test]
fn every_image_is_built_for_both_platforms_with_an_sbom_and_provenance() {
    let wf = workflow();
    assert_eq!(wf["env"]["REGISTRY"].as_str(), Some(REGISTRY));
    let matrix = &wf["jobs"]["image"]["strategy"]["matrix"];
    let images: Vec<(&str, &str)> = matrix["image"]
        .as_sequence()
        .expect("an image matrix")
        .iter()
        .map(|i| {
            (
                i["name"].as_str().unwrap(),
                i["dockerfile"].as_str().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        images,
        [
            ("hollo", "runtime/Dockerfile"),
            ("hollo-operator", "operator/Dockerfile")
        ]
    );
    for (_, dockerfile) in &images {
        let text = read(dockerfile);
        for arg in ["ARG VERSION=", "ARG GIT_COMMIT="] {
            assert!(
                text.contains(arg),
                "{dockerfile} takes the build argument the workflow passes: {arg}"
            );
        }
    }
    let arches: Vec<&str> = matrix["platform"]
        .as_sequence()
        .expect("a platform matrix")
        .iter()
        .map(|p| p["arch"].as_str().unwrap())
        .collect();
    assert_eq!(arches, ["linux/amd64", "linux/arm64"]);
    let build = job_text(&wf, "image");
    assert!(build.contains("sbom: true"), "{build}");
    assert!(build.contains("provenance: mode=max"), "{build}");
    assert!(build.contains("push-by-digest=true"), "{build}");
}

#[test]
fn every_image_and_chart_is_signed_keylessly() {
    let wf = workflow();
    for job in ["manifest", "charts"] {
        assert_eq!(
            wf["jobs"][job]["permissions"]["id-token"].as_str(),
            Some("write"),
            "job {job} gets an OIDC token for keyless signing"
        );
        let text = job_text(&wf, job);
        assert!(text.contains("sigstore/cosign-installer"), "{job}: {text}");
        assert!(text.contains("cosign sign --yes"), "{job}: {text}");
        assert!(!text.contains("--key"), "{job} signs keylessly: {text}");
    }
    let merge = job_text(&wf, "manifest");
    assert!(
        merge.contains("for name in hollo hollo-operator"),
        "{merge}"
    );
    let charts = job_text(&wf, "charts");
    assert!(
        charts.contains("for chart in hollo-operator hollo"),
        "{charts}"
    );
    assert!(charts.contains("oci://$REGISTRY/charts"), "{charts}");
}

#[test]
fn the_workflow_and_the_dry_run_pin_the_same_lines_of_the_charts() {
    for (chart, line) in [
        ("charts/hollo-operator/values.yaml", OPERATOR_DIGEST_LINE),
        ("charts/hollo/values.yaml", HOLLO_IMAGE_LINE),
    ] {
        let values = read(chart);
        assert_eq!(
            values.lines().filter(|l| *l == line).count(),
            1,
            "{chart} holds `{line}` once: the release rewrites it to pin the digest"
        );
    }
    let charts = job_text(&workflow(), "charts");
    let dry_run = read("scripts/release");
    for (what, text) in [("the workflow", &charts), ("scripts/release", &dry_run)] {
        assert!(
            text.contains(OPERATOR_DIGEST_LINE),
            "{what} rewrites the operator chart's digest line"
        );
        assert!(
            text.contains(HOLLO_IMAGE_LINE),
            "{what} rewrites the hollo chart's image line"
        );
    }
    // The operator chart renders the digest after the tag.
    let deployment = read("charts/hollo-operator/templates/deployment.yaml");
    assert!(
        deployment.contains("{{ with .Values.image.digest }}@{{ . }}{{ end }}"),
        "{deployment}"
    );
}
