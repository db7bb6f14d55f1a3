//! `hollo-media-bench`: the peak memory (VmHWM) of processing uploads at once, the number
//! R-API is about (six uploads of a 258 KB PNG bomb took a node to 3.1 GB). Memory
//! is measured here, in a process of its own, not in a timed test.
//!
//! `hollo-media-bench write-bomb FILE [--width W --height H --bits 16|8]` writes a W×H RGBA PNG
//! of zeros (default 7680×4320 at 16 bits: within the default pixel limit, about 1.3 MB with
//! `image`'s encoder, 265 MB decoded; `--bits 8` makes one within the decoded budget).
//! `hollo-media-bench run FILE --uploads N [--slots S] [--unbounded]` runs N uploads of FILE at
//! once through what an upload does (`processing::probe`, then `processing::process` in the
//! decoding slots) and prints each outcome and the process's peak RSS. `--unbounded` is what
//! the code did before the fix: only the pixel check from the header, every decode at once on
//! the blocking pool, the decoder allowed 8 bytes per pixel.

use std::sync::Arc;

use anyhow::{Context, Result, bail};
use clap::{Parser, Subcommand};
use hollo_runtime::media::processing::{self, DecodeSlots, Format, Probe, ProcessError};

#[derive(Parser)]
#[command(
    name = "hollo-media-bench",
    about = "Peak memory of concurrent image uploads"
)]
struct Args {
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Subcommand)]
enum Cmd {
    WriteBomb {
        file: std::path::PathBuf,
        #[arg(long, default_value_t = 7680)]
        width: u32,
        #[arg(long, default_value_t = 4320)]
        height: u32,
        /// Bits per channel: 16 (the bomb) or 8 (an image within the decoded budget).
        #[arg(long, default_value_t = 16)]
        bits: u8,
    },
    Run {
        file: std::path::PathBuf,
        #[arg(long, default_value_t = 6)]
        uploads: usize,
        #[arg(long, default_value_t = 2)]
        slots: usize,
        #[arg(long, default_value_t = 33_177_600)]
        max_pixels: u64,
        #[arg(long)]
        unbounded: bool,
    },
}

/// The pre-fix path: dimensions only, decoded with an allowance of 8 bytes per pixel.
fn unbounded(bytes: &[u8], max_pixels: u64) -> Result<(u32, u32), ProcessError> {
    use image::{ImageDecoder, ImageReader, Limits};
    let format = Format::sniff(bytes).ok_or(ProcessError::UnsupportedType)?;
    let reader = || {
        ImageReader::with_format(
            std::io::Cursor::new(bytes),
            match format {
                Format::Png => image::ImageFormat::Png,
                Format::Gif => image::ImageFormat::Gif,
                Format::Jpeg => image::ImageFormat::Jpeg,
                Format::WebP => image::ImageFormat::WebP,
            },
        )
    };
    let (w, h) = reader()
        .into_decoder()
        .map(|d| d.dimensions())
        .map_err(|e| ProcessError::Undecodable(e.to_string()))?;
    if u64::from(w) * u64::from(h) > max_pixels {
        return Err(ProcessError::TooManyPixels(w, h, max_pixels));
    }
    let mut r = reader();
    let mut limits = Limits::default();
    limits.max_alloc = Some(max_pixels.saturating_mul(8).saturating_add(64 << 20));
    r.limits(limits);
    let image = r
        .decode()
        .map_err(|e| ProcessError::Undecodable(e.to_string()))?;
    let small = image.thumbnail(640, 640);
    let _ = image.thumbnail(100, 100).to_rgba8();
    Ok((small.width(), small.height()))
}

#[tokio::main]
async fn main() -> Result<()> {
    match Args::parse().cmd {
        Cmd::WriteBomb {
            file,
            width,
            height,
            bits,
        } => {
            let img = match bits {
                16 => image::DynamicImage::ImageRgba16(image::ImageBuffer::new(width, height)),
                8 => image::DynamicImage::ImageRgba8(image::ImageBuffer::new(width, height)),
                _ => bail!("--bits must be 8 or 16"),
            };
            img.save_with_format(&file, image::ImageFormat::Png)
                .with_context(|| format!("writing {}", file.display()))?;
            let len = std::fs::metadata(&file)?.len();
            println!(
                "{}: {width}x{height} {bits}-bit RGBA, {len} bytes",
                file.display()
            );
        }
        Cmd::Run {
            file,
            uploads,
            slots,
            max_pixels,
            unbounded: old,
        } => {
            if uploads == 0 {
                bail!("--uploads must be at least 1");
            }
            let bytes = Arc::new(std::fs::read(&file)?);
            let before = hollo_runtime::metrics::peak_rss_kb();
            let slots = DecodeSlots::new(slots);
            let runs = (0..uploads).map(|_| {
                let (bytes, slots) = (bytes.clone(), slots.clone());
                tokio::spawn(async move {
                    if old {
                        return tokio::task::spawn_blocking(move || unbounded(&bytes, max_pixels))
                            .await
                            .map_err(|e| ProcessError::Undecodable(e.to_string()))
                            .and_then(|r| r)
                            .map(|(w, h)| format!("processed, thumbnail {w}x{h}"));
                    }
                    let probe: Probe = processing::probe(&bytes, usize::MAX, max_pixels)?;
                    slots
                        .run(move || processing::process(&bytes, probe, max_pixels, None))
                        .await
                        .map(|p| {
                            format!(
                                "processed, thumbnail {}x{}",
                                p.thumbnail_width, p.thumbnail_height
                            )
                        })
                })
            });
            for (i, r) in futures::future::join_all(runs)
                .await
                .into_iter()
                .enumerate()
            {
                match r {
                    Ok(Ok(what)) => println!("upload {i}: {what}"),
                    Ok(Err(e)) => println!("upload {i}: refused: {e}"),
                    Err(e) => println!("upload {i}: panicked: {e}"),
                }
            }
            println!(
                "peak_rss_kb_before={before} peak_rss_kb={} uploads={uploads} mode={}",
                hollo_runtime::metrics::peak_rss_kb(),
                if old {
                    "unbounded (before the fix)"
                } else {
                    "bounded"
                }
            );
        }
    }
    Ok(())
}
