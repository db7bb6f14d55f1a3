//! `multipart/form-data` bodies built by hand, as a browser or a Mastodon app sends them (the
//! runtime's reqwest is built without its multipart feature).

use uuid::Uuid;

/// One multipart field: name, `(filename, content type)` when it is a file, bytes.
pub type Part<'a> = (&'a str, Option<(&'a str, &'a str)>, &'a [u8]);

/// A multipart form of `parts`.
pub fn form(parts: &[Part<'_>]) -> (String, Vec<u8>) {
    let boundary = format!("----hollo{}", Uuid::new_v4().simple());
    let mut body = Vec::new();
    for (name, file, bytes) in parts {
        body.extend_from_slice(format!("--{boundary}\r\n").as_bytes());
        match file {
            Some((filename, ctype)) => body.extend_from_slice(
                format!(
                    "Content-Disposition: form-data; name=\"{name}\"; filename=\"{filename}\"\r\n\
                     Content-Type: {ctype}\r\n\r\n"
                )
                .as_bytes(),
            ),
            None => body.extend_from_slice(
                format!("Content-Disposition: form-data; name=\"{name}\"\r\n\r\n").as_bytes(),
            ),
        }
        body.extend_from_slice(bytes);
        body.extend_from_slice(b"\r\n");
    }
    body.extend_from_slice(format!("--{boundary}--\r\n").as_bytes());
    (format!("multipart/form-data; boundary={boundary}"), body)
}

/// A `width`×`height` PNG with a gradient (so thumbnails and blurhashes have something to
/// show).
pub fn png(width: u32, height: u32) -> Vec<u8> {
    let img = image::DynamicImage::ImageRgba8(image::RgbaImage::from_fn(width, height, |x, y| {
        image::Rgba([(x * 30) as u8, (y * 40) as u8, 90, 255])
    }));
    let mut out = std::io::Cursor::new(Vec::new());
    img.write_to(&mut out, image::ImageFormat::Png)
        .expect("encode");
    out.into_inner()
}

/// A `w`×`h` image of another gradient with opacity `alpha`, encoded as `format` (a JPEG
/// without the alpha channel).
pub fn encode(w: u32, h: u32, format: image::ImageFormat, alpha: u8) -> Vec<u8> {
    let img = image::DynamicImage::ImageRgba8(image::RgbaImage::from_fn(w, h, |x, y| {
        image::Rgba([(x * 7 % 256) as u8, (y * 3 % 256) as u8, 90, alpha])
    }));
    let img = match format {
        image::ImageFormat::Jpeg => image::DynamicImage::ImageRgb8(img.to_rgb8()),
        _ => img,
    };
    let mut out = std::io::Cursor::new(Vec::new());
    img.write_to(&mut out, format).expect("encode");
    out.into_inner()
}

/// Uploads a small PNG through `POST /api/v2/media` as `token`'s holder; the
/// MediaAttachment entity.
pub async fn upload_png(base: &str, token: &str) -> serde_json::Value {
    let (content_type, body) = form(&[("file", Some(("a.png", "image/png")), &png(8, 8))]);
    let upload = reqwest::Client::new()
        .post(format!("{base}/api/v2/media"))
        .bearer_auth(token)
        .header("content-type", content_type)
        .body(body)
        .send()
        .await
        .expect("upload");
    assert!(upload.status().is_success(), "{}", upload.status());
    upload.json().await.expect("the MediaAttachment")
}
