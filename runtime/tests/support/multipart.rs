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
