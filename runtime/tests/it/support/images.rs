//! Crafted images for the media limits: the media integration tests and the unit tests of
//! `media::processing` (which include this file by its path) make them the same way.

/// A GIF whose logical screen is `sw`×`sh` and whose second frame is `fw`×`fh`.
pub fn gif_with_frame(sw: u16, sh: u16, fw: u16, fh: u16) -> Vec<u8> {
    let mut out = Vec::new();
    {
        let mut enc =
            gif::Encoder::new(&mut out, sw, sh, &[0, 0, 0, 255, 255, 255]).expect("gif encoder");
        for (w, h) in [(sw, sh), (fw, fh)] {
            let frame = gif::Frame {
                width: w,
                height: h,
                buffer: std::borrow::Cow::Owned(vec![1; usize::from(w) * usize::from(h)]),
                ..gif::Frame::default()
            };
            enc.write_frame(&frame).expect("frame");
        }
    }
    out
}

/// A `w`×`h` 16-bit RGBA PNG of zeros, written row by row: a few hundred KB that decode to
/// `w × h × 8` bytes.
pub fn png_bomb(w: u32, h: u32) -> Vec<u8> {
    let mut out = Vec::new();
    {
        let mut enc = png::Encoder::new(&mut out, w, h);
        enc.set_color(png::ColorType::Rgba);
        enc.set_depth(png::BitDepth::Sixteen);
        enc.set_compression(png::Compression::Balanced);
        let mut writer = enc.write_header().expect("header");
        let mut stream = writer.stream_writer().expect("stream");
        let row = vec![0u8; w as usize * 8];
        for _ in 0..h {
            std::io::Write::write_all(&mut stream, &row).expect("row");
        }
        stream.finish().expect("finish");
    }
    out
}
