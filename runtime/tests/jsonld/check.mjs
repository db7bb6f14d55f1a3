// Expands ActivityPub documents with jsonld.js, offline, and reports every term that
// expansion drops or leaves undefined (issue 17). Usage: node check.mjs FILE, where FILE holds
// [{"label": "...", "doc": {...}}, ...]. Prints one JSON report; exits 1 when any document
// has a problem, 2 when it cannot run.
//
// Two kinds of loss are caught:
// - a term the context does not define at all is dropped by expansion: jsonld.js's safe mode
//   turns that into an error;
// - the ActivityStreams context maps every undefined term to a blank node through
//   `"@vocab": "_:"`, so expansion keeps it under `_:term`, which no vocabulary defines and
//   RDF conversion drops: every `_:` property or type in the expanded form is reported.
import { readFileSync } from "node:fs";
import { createRequire } from "node:module";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

const here = dirname(fileURLToPath(import.meta.url));
// jsonld.js lives where `install` put it (HOLLO_JSONLD_DIR), not beside this script.
const installDir = process.env.HOLLO_JSONLD_DIR ?? join(here, "../../../target/jsonld-check");
let jsonld;
try {
  jsonld = createRequire(join(installDir, "package.json"))("jsonld");
} catch (e) {
  console.error(`jsonld.js is not installed in ${installDir}: run runtime/tests/jsonld/install (${e.message})`);
  process.exit(2);
}
// The only contexts that resolve: what we ship as fixtures. Any other URL fails the document.
const CONTEXTS = {
  "https://www.w3.org/ns/activitystreams": "activitystreams.jsonld",
  "https://w3id.org/security/v1": "security-v1.jsonld",
};

async function documentLoader(url) {
  const file = CONTEXTS[url];
  if (!file) {
    throw new Error(`context ${url} is not available offline (only ${Object.keys(CONTEXTS).join(", ")})`);
  }
  return {
    contextUrl: null,
    documentUrl: url,
    document: JSON.parse(readFileSync(join(here, "contexts", file), "utf8")),
  };
}

// Properties and types that expanded to blank-node IRIs, with their path.
function undefinedTerms(node, path, out) {
  if (Array.isArray(node)) {
    node.forEach((n, i) => undefinedTerms(n, `${path}[${i}]`, out));
    return out;
  }
  if (node === null || typeof node !== "object") return out;
  for (const [key, value] of Object.entries(node)) {
    if (key.startsWith("_:")) out.push(`${path}: property ${key.slice(2)} is not defined by the context`);
    if (key === "@type") {
      for (const t of [].concat(value)) {
        if (typeof t === "string" && t.startsWith("_:")) out.push(`${path}: type ${t.slice(2)} is not defined by the context`);
      }
    }
    if (key !== "@value") undefinedTerms(value, `${path}.${key}`, out);
  }
  return out;
}

async function check(doc) {
  const problems = [];
  if (doc === null || typeof doc !== "object" || !("@context" in doc)) {
    problems.push("no @context");
    return problems;
  }
  let expanded;
  try {
    expanded = await jsonld.expand(doc, { documentLoader, safe: true });
  } catch (e) {
    const details = e.details?.event?.details ?? e.details ?? {};
    const cause = details.cause?.message ? ` (${details.cause.message})` : "";
    problems.push(`expansion failed: ${e.message}${cause} ${JSON.stringify(details)}`.trim());
    return problems;
  }
  return undefinedTerms(expanded, "$", problems);
}

let input;
try {
  input = JSON.parse(readFileSync(process.argv[2], "utf8"));
} catch (e) {
  console.error(`cannot read the documents: ${e.message}`);
  process.exit(2);
}
const report = [];
for (const { label, doc } of input) {
  report.push({ label, problems: await check(doc) });
}
console.log(JSON.stringify(report, null, 2));
process.exit(report.some((r) => r.problems.length > 0) ? 1 : 0);
