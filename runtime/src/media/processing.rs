//! What an upload is and what we make of it: the format sniffed from its bytes (the client's
//! `Content-Type` and file name are never believed), its dimensions read from the header alone
//! (so an over-large image is refused before it is decoded), and the processed result — a
//! thumbnail of at most 640×640 keeping the aspect ratio, and a BlurHash. CPU work: callers
//! run it on a blocking thread.

use std::io::Cursor;

use image::{DynamicImage, ImageDecoder, ImageFormat, ImageReader, Limits};

/// The longest side of a thumbnail (`meta.small`), as Mastodon's `small` style.
pub const THUMBNAIL_MAX: u32 = 640;
/// BlurHash components (Mastodon's 4×4), computed on a copy at most this wide and high.
const BLURHASH_COMPONENTS: u32 = 4;
const BLURHASH_SOURCE_MAX: u32 = 100;

/// The four formats accepted (R-MAPI-3).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Format {
    Jpeg,
    Png,
    Gif,
    WebP,
}

impl Format {
    /// The format the bytes are, by their magic numbers; `None` for anything else.
    pub fn sniff(bytes: &[u8]) -> Option<Format> {
        if bytes.starts_with(&[0xFF, 0xD8, 0xFF]) {
            Some(Format::Jpeg)
        } else if bytes.starts_with(b"\x89PNG\r\n\x1a\n") {
            Some(Format::Png)
        } else if bytes.starts_with(b"GIF87a") || bytes.starts_with(b"GIF89a") {
            Some(Format::Gif)
        } else if bytes.len() >= 12 && &bytes[..4] == b"RIFF" && &bytes[8..12] == b"WEBP" {
            Some(Format::WebP)
        } else {
            None
        }
    }

    pub fn mime(self) -> &'static str {
        match self {
            Format::Jpeg => "image/jpeg",
            Format::Png => "image/png",
            Format::Gif => "image/gif",
            Format::WebP => "image/webp",
        }
    }

    pub fn ext(self) -> &'static str {
        match self {
            Format::Jpeg => "jpg",
            Format::Png => "png",
            Format::Gif => "gif",
            Format::WebP => "webp",
        }
    }

    /// The format a stored key's extension names (ours: chosen from the sniffed bytes).
    pub fn from_key(key: &str) -> Option<Format> {
        let ext = key.rsplit_once('.')?.1;
        Self::ALL.into_iter().find(|f| f.ext() == ext)
    }

    const ALL: [Format; 4] = [Format::Jpeg, Format::Png, Format::Gif, Format::WebP];

    fn image_format(self) -> ImageFormat {
        match self {
            Format::Jpeg => ImageFormat::Jpeg,
            Format::Png => ImageFormat::Png,
            Format::Gif => ImageFormat::Gif,
            Format::WebP => ImageFormat::WebP,
        }
    }

    /// Every MIME type accepted, for the instance's `configuration`.
    pub const MIMES: [&'static str; 4] = ["image/jpeg", "image/png", "image/gif", "image/webp"];
}

/// Why an upload is refused or its processing failed. The text is the client's `error`.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum ProcessError {
    #[error("Validation failed: File content type is invalid (JPEG, PNG, GIF or WebP only)")]
    UnsupportedType,
    #[error("Validation failed: File size must be at most {0} bytes")]
    TooLarge(usize),
    #[error("Validation failed: Image dimensions {0}x{1} exceed {2} pixels")]
    TooManyPixels(u32, u32, u64),
    /// The header's colour type and depth make the decoded image bigger than the largest
    /// allowed image in 8-bit RGBA (a 16-bit PNG at the pixel limit: a "PNG bomb" of a few
    /// hundred KB that decodes to hundreds of MB).
    #[error("Validation failed: the decoded image would take {0} bytes, over {1}")]
    TooManyBytesDecoded(u64, u64),
    #[error("Validation failed: the image cannot be read: {0}")]
    Undecodable(String),
}

/// What a quick look at the bytes tells: format and dimensions, within the limits.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Probe {
    pub format: Format,
    pub width: u32,
    pub height: u32,
}

/// The most a decoded image may take: the largest allowed image in 8-bit RGBA. Checked from
/// the header before decoding, and given to the decoder as its allocation limit.
pub fn decoded_budget(max_pixels: u64) -> u64 {
    max_pixels.saturating_mul(4)
}

/// Sniffs and reads the dimensions, colour type and (for a GIF) every frame's size from the
/// headers, refusing what is over the limits — nothing is decoded, so a bomb costs no memory.
pub fn probe(bytes: &[u8], max_bytes: usize, max_pixels: u64) -> Result<Probe, ProcessError> {
    if bytes.len() > max_bytes {
        return Err(ProcessError::TooLarge(max_bytes));
    }
    let format = Format::sniff(bytes).ok_or(ProcessError::UnsupportedType)?;
    let decoder = ImageReader::with_format(Cursor::new(bytes), format.image_format())
        .into_decoder()
        .map_err(|e| ProcessError::Undecodable(e.to_string()))?;
    let (width, height) = decoder.dimensions();
    let decoded_bytes = decoder.total_bytes();
    drop(decoder);
    if width == 0 || height == 0 {
        return Err(ProcessError::Undecodable("the image is empty".into()));
    }
    if u64::from(width) * u64::from(height) > max_pixels {
        return Err(ProcessError::TooManyPixels(width, height, max_pixels));
    }
    if decoded_bytes > decoded_budget(max_pixels) {
        return Err(ProcessError::TooManyBytesDecoded(
            decoded_bytes,
            decoded_budget(max_pixels),
        ));
    }
    if format == Format::Gif {
        check_gif_frames(bytes, max_pixels)?;
    }
    Ok(Probe {
        format,
        width,
        height,
    })
}

/// A GIF's logical screen says nothing of its frames: a 1×1 screen may hold a 9000×9000 frame,
/// which the decoder allocates in full before cropping it. Walks every frame's descriptor
/// (the LZW data is skipped, not decoded) and refuses one over the pixel limit.
fn check_gif_frames(bytes: &[u8], max_pixels: u64) -> Result<(), ProcessError> {
    let mut options = gif::DecodeOptions::new();
    options.skip_frame_decoding(true);
    let mut reader = options
        .read_info(Cursor::new(bytes))
        .map_err(|e| ProcessError::Undecodable(e.to_string()))?;
    while let Some(frame) = reader
        .next_frame_info()
        .map_err(|e| ProcessError::Undecodable(e.to_string()))?
    {
        let (w, h) = (u32::from(frame.width), u32::from(frame.height));
        if u64::from(w) * u64::from(h) > max_pixels {
            return Err(ProcessError::TooManyPixels(w, h, max_pixels));
        }
    }
    Ok(())
}

/// The decoding slots of a process (`MEDIA_DECODE_CONCURRENCY`): every decode — an upload
/// processed at once on a web node, or a deferred one on a worker — runs in one, on a blocking
/// thread, so at most that many images are in memory decoded at a time however many uploads
/// arrive together (six PNG bombs at once took 3.1 GB before, R-API). More wait for
/// a slot.
#[derive(Clone, Debug)]
pub struct DecodeSlots(std::sync::Arc<tokio::sync::Semaphore>);

impl DecodeSlots {
    pub fn new(slots: usize) -> DecodeSlots {
        DecodeSlots(std::sync::Arc::new(tokio::sync::Semaphore::new(
            slots.max(1),
        )))
    }

    /// Runs `work` on a blocking thread once a slot is free; the slot is held until `work`
    /// returns (also when the caller stops waiting, since the thread cannot be cancelled).
    pub async fn run<T, F>(&self, work: F) -> Result<T, ProcessError>
    where
        F: FnOnce() -> Result<T, ProcessError> + Send + 'static,
        T: Send + 'static,
    {
        let permit = self
            .0
            .clone()
            .acquire_owned()
            .await
            .map_err(|e| ProcessError::Undecodable(format!("decoding slots: {e}")))?;
        tokio::task::spawn_blocking(move || {
            let out = work();
            drop(permit);
            out
        })
        .await
        .map_err(|e| ProcessError::Undecodable(format!("processing the image: {e}")))?
    }
}

/// The result of processing: the thumbnail's bytes and dimensions, and the BlurHash.
#[derive(Clone, Debug)]
pub struct Processed {
    pub thumbnail: Vec<u8>,
    pub thumbnail_format: Format,
    pub thumbnail_width: u32,
    pub thumbnail_height: u32,
    pub blurhash: String,
}

/// Decodes the image (within the pixel limit, so a lying header cannot make the decoder
/// allocate more) and makes its thumbnail and BlurHash. `preview` is a client-given
/// thumbnail (the `thumbnail` field), used for the small version when present.
pub fn process(
    bytes: &[u8],
    probe: Probe,
    max_pixels: u64,
    preview: Option<(&[u8], Probe)>,
) -> Result<Processed, ProcessError> {
    let image = decode(bytes, probe, max_pixels)?;
    let blurhash = blurhash_of(&image)?;
    let small_source = match preview {
        Some((b, p)) => decode(b, p, max_pixels)?,
        None => image,
    };
    let small = if small_source.width() > THUMBNAIL_MAX || small_source.height() > THUMBNAIL_MAX {
        small_source.thumbnail(THUMBNAIL_MAX, THUMBNAIL_MAX)
    } else {
        small_source
    };
    // JPEG for opaque thumbnails (small), PNG where transparency must survive.
    let (format, small) = if has_transparency(&small) {
        (Format::Png, small)
    } else {
        (Format::Jpeg, DynamicImage::ImageRgb8(small.to_rgb8()))
    };
    let mut out = Cursor::new(Vec::new());
    small
        .write_to(&mut out, format.image_format())
        .map_err(|e| ProcessError::Undecodable(format!("encoding the thumbnail: {e}")))?;
    Ok(Processed {
        thumbnail: out.into_inner(),
        thumbnail_format: format,
        thumbnail_width: small.width(),
        thumbnail_height: small.height(),
        blurhash,
    })
}

/// An image re-encoded at a fixed size (`fill`).
#[derive(Clone, Debug)]
pub struct Filled {
    pub bytes: Vec<u8>,
    pub format: Format,
    pub width: u32,
    pub height: u32,
}

/// Decodes the image (within the pixel limit) and scales and crops it to exactly
/// `width`×`height`, centred — Mastodon's `400x400#` avatar and `1500x500#` header (ImageMagick's
/// crop-to-fill, which also enlarges a smaller image). An animated GIF gives its first frame:
/// the result is one still image, so the entity's `*_static` URL is the same file. JPEG when
/// opaque, PNG when transparency must survive (as thumbnails).
pub fn fill(
    bytes: &[u8],
    probe: Probe,
    max_pixels: u64,
    width: u32,
    height: u32,
) -> Result<Filled, ProcessError> {
    let image = decode(bytes, probe, max_pixels)?;
    let filled = image.resize_to_fill(width, height, image::imageops::FilterType::CatmullRom);
    let (format, filled) = if has_transparency(&filled) {
        (Format::Png, filled)
    } else {
        (Format::Jpeg, DynamicImage::ImageRgb8(filled.to_rgb8()))
    };
    let mut out = Cursor::new(Vec::new());
    filled
        .write_to(&mut out, format.image_format())
        .map_err(|e| ProcessError::Undecodable(format!("encoding the image: {e}")))?;
    Ok(Filled {
        bytes: out.into_inner(),
        format,
        width: filled.width(),
        height: filled.height(),
    })
}

/// Whether any pixel is not fully opaque (an RGBA image of opaque pixels is a JPEG thumbnail).
fn has_transparency(image: &DynamicImage) -> bool {
    image.color().has_alpha() && image.to_rgba8().pixels().any(|p| p.0[3] < 255)
}

fn decode(bytes: &[u8], probe: Probe, max_pixels: u64) -> Result<DynamicImage, ProcessError> {
    let mut reader = ImageReader::with_format(Cursor::new(bytes), probe.format.image_format());
    let mut limits = Limits::default();
    let side = u32::try_from(max_pixels).unwrap_or(u32::MAX);
    limits.max_image_width = Some(side);
    limits.max_image_height = Some(side);
    // The decoded budget (checked from the header by `probe`), plus the decoder's own
    // buffers: a header that lies cannot make the decoder allocate more.
    limits.max_alloc = Some(decoded_budget(max_pixels).saturating_add(64 << 20));
    reader.limits(limits);
    let image = reader
        .decode()
        .map_err(|e| ProcessError::Undecodable(e.to_string()))?;
    if u64::from(image.width()) * u64::from(image.height()) > max_pixels {
        return Err(ProcessError::TooManyPixels(
            image.width(),
            image.height(),
            max_pixels,
        ));
    }
    Ok(image)
}

fn blurhash_of(image: &DynamicImage) -> Result<String, ProcessError> {
    let small = image
        .thumbnail(BLURHASH_SOURCE_MAX, BLURHASH_SOURCE_MAX)
        .to_rgba8();
    blurhash::encode(
        BLURHASH_COMPONENTS,
        BLURHASH_COMPONENTS,
        small.width(),
        small.height(),
        small.as_raw(),
    )
    .map_err(|e| ProcessError::Undecodable(format!("computing the blurhash: {e}")))
}

#[cfg(test)]
#[path = "../../tests/it/support/images.rs"]
mod test_images;

#[cfg(test)]
mod tests {
    use super::test_images::{gif_with_frame, png_bomb};
    use super::*;

    fn png(w: u32, h: u32) -> Vec<u8> {
        let img = DynamicImage::ImageRgb8(image::RgbImage::from_fn(w, h, |x, y| {
            image::Rgb([(x % 256) as u8, (y % 256) as u8, 128])
        }));
        let mut out = Cursor::new(Vec::new());
        img.write_to(&mut out, ImageFormat::Png).expect("png");
        out.into_inner()
    }

    #[test]
    fn formats_are_sniffed_from_bytes_only() {
        assert_eq!(Format::sniff(&png(2, 2)), Some(Format::Png));
        assert_eq!(Format::sniff(b"GIF89a...."), Some(Format::Gif));
        assert_eq!(Format::sniff(b"RIFF\0\0\0\0WEBPVP8 "), Some(Format::WebP));
        assert_eq!(Format::sniff(&[0xFF, 0xD8, 0xFF, 0xE0]), Some(Format::Jpeg));
        assert_eq!(Format::sniff(b"<svg xmlns="), None);
        assert_eq!(Format::sniff(b"RIFF\0\0\0\0WAVE"), None);
        assert_eq!(Format::sniff(b""), None);
        assert_eq!(Format::from_key("media/x/small.jpg"), Some(Format::Jpeg));
        assert_eq!(Format::from_key("media/x/original.svg"), None);
    }

    #[test]
    fn limits_are_checked_before_decoding() {
        let bytes = png(100, 50);
        assert_eq!(
            probe(&bytes, bytes.len() - 1, 1_000_000),
            Err(ProcessError::TooLarge(bytes.len() - 1))
        );
        assert_eq!(
            probe(&bytes, 1 << 20, 4999),
            Err(ProcessError::TooManyPixels(100, 50, 4999))
        );
        let p = probe(&bytes, 1 << 20, 5000).expect("within limits");
        assert_eq!((p.format, p.width, p.height), (Format::Png, 100, 50));
        assert_eq!(
            probe(b"hello", 100, 100),
            Err(ProcessError::UnsupportedType)
        );
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn decodes_run_at_most_as_many_at_once_as_there_are_slots() {
        use std::sync::Arc;
        use std::sync::atomic::{AtomicUsize, Ordering};
        let slots = DecodeSlots::new(2);
        let (now, most) = (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)));
        let runs = (0..8).map(|_| {
            let (slots, now, most) = (slots.clone(), now.clone(), most.clone());
            tokio::spawn(async move {
                slots
                    .run(move || {
                        let n = now.fetch_add(1, Ordering::SeqCst) + 1;
                        most.fetch_max(n, Ordering::SeqCst);
                        std::thread::sleep(std::time::Duration::from_millis(30));
                        now.fetch_sub(1, Ordering::SeqCst);
                        Ok(())
                    })
                    .await
            })
        });
        for r in futures::future::join_all(runs).await {
            r.expect("joined").expect("ran");
        }
        assert_eq!(most.load(Ordering::SeqCst), 2);
    }

    /// A 7680×4320 16-bit RGBA PNG of zeros: within the pixel limit, about 260 KB, and 265 MB
    /// decoded — refused from its header (R-API).
    #[test]
    fn a_png_bomb_is_refused_from_its_header() {
        let bomb = png_bomb(7680, 4320);
        assert!(bomb.len() < 1 << 20, "{} bytes", bomb.len());
        assert_eq!(
            probe(&bomb, 16 << 20, 33_177_600),
            Err(ProcessError::TooManyBytesDecoded(
                7680 * 4320 * 8,
                33_177_600 * 4
            ))
        );
        // The same image in 8 bits per channel is within the budget.
        let p = probe(&png_bomb_8bit(1000, 1000), 16 << 20, 1_000_000).expect("8-bit");
        assert_eq!((p.width, p.height), (1000, 1000));
    }

    #[test]
    fn every_gif_frame_is_checked_against_the_pixel_limit() {
        let gif = gif_with_frame(1, 1, 300, 200);
        assert_eq!(
            probe(&gif, 1 << 20, 59_999),
            Err(ProcessError::TooManyPixels(300, 200, 59_999))
        );
        let p = probe(&gif, 1 << 20, 60_000).expect("within the limit");
        assert_eq!((p.format, p.width, p.height), (Format::Gif, 1, 1));
    }

    fn png_bomb_8bit(w: u32, h: u32) -> Vec<u8> {
        let img = DynamicImage::ImageRgba8(image::RgbaImage::new(w, h));
        let mut out = Cursor::new(Vec::new());
        img.write_to(&mut out, ImageFormat::Png).expect("png");
        out.into_inner()
    }

    #[test]
    fn fill_crops_to_the_exact_size_and_enlarges_small_images() {
        let wide = png(1280, 320);
        let p = probe(&wide, 1 << 24, 1 << 24).expect("probe");
        let out = fill(&wide, p, 1 << 24, 400, 400).expect("fill");
        assert_eq!(
            (out.width, out.height, out.format),
            (400, 400, Format::Jpeg)
        );
        let back = image::load_from_memory(&out.bytes).expect("decodes");
        assert_eq!((back.width(), back.height()), (400, 400));
        let small = png(30, 20);
        let p = probe(&small, 1 << 24, 1 << 24).expect("probe");
        let out = fill(&small, p, 1 << 24, 1500, 500).expect("fill");
        assert_eq!((out.width, out.height), (1500, 500));
        let clear = DynamicImage::ImageRgba8(image::RgbaImage::new(10, 10));
        let mut bytes = Cursor::new(Vec::new());
        clear.write_to(&mut bytes, ImageFormat::Png).expect("png");
        let bytes = bytes.into_inner();
        let p = probe(&bytes, 1 << 24, 1 << 24).expect("probe");
        assert_eq!(
            fill(&bytes, p, 1 << 24, 40, 40).expect("fill").format,
            Format::Png
        );
        // An animated GIF gives one still image (its first frame), not a GIF.
        let gif = gif_with_frame(20, 10, 20, 10);
        let p = probe(&gif, 1 << 24, 1 << 24).expect("probe");
        let out = fill(&gif, p, 1 << 24, 40, 40).expect("fill");
        assert_eq!((out.width, out.height, out.format), (40, 40, Format::Jpeg));
        assert_eq!(Format::sniff(&out.bytes), Some(Format::Jpeg));
    }

    #[test]
    fn thumbnails_keep_the_aspect_and_never_grow() {
        let big = png(1280, 320);
        let p = probe(&big, 1 << 24, 1 << 24).expect("probe");
        let out = process(&big, p, 1 << 24, None).expect("process");
        assert_eq!((out.thumbnail_width, out.thumbnail_height), (640, 160));
        assert_eq!(out.thumbnail_format, Format::Jpeg);
        assert_eq!(Format::sniff(&out.thumbnail), Some(Format::Jpeg));
        assert!(!out.blurhash.is_empty());
        let small = png(30, 20);
        let p = probe(&small, 1 << 24, 1 << 24).expect("probe");
        let out = process(&small, p, 1 << 24, None).expect("process");
        assert_eq!((out.thumbnail_width, out.thumbnail_height), (30, 20));
    }
}
