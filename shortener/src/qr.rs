//! QR codes of short URLs: the symbol from the `qrcode` crate, drawn as SVG (one path of dark
//! modules) or as a 1-bit PNG (the `png` crate), with a quiet zone of `margin` modules.

use crate::domain::{Error, echo};
use qrcode::{Color, EcLevel, QrCode};

/// The smallest and largest image, in pixels a side.
pub const SIZES: std::ops::RangeInclusive<u32> = 64..=2048;
/// The default image side, in pixels.
pub const DEFAULT_SIZE: u32 = 256;
/// The most quiet-zone modules around the symbol (the standard asks for 4).
pub const MAX_MARGIN: u32 = 16;
/// The default quiet zone.
pub const DEFAULT_MARGIN: u32 = 4;

/// The image format.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Format {
    /// Scalable vector graphics.
    Svg,
    /// A PNG bitmap.
    Png,
}

impl Format {
    /// Its media type.
    pub fn content_type(self) -> &'static str {
        match self {
            Format::Svg => "image/svg+xml",
            Format::Png => "image/png",
        }
    }

    fn name(self) -> &'static str {
        match self {
            Format::Svg => "svg",
            Format::Png => "png",
        }
    }
}

/// What to draw, checked.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct QrOptions {
    /// SVG or PNG.
    pub format: Format,
    /// Pixels a side (PNG; the SVG's width and height).
    pub size: u32,
    /// Quiet-zone modules on each side.
    pub margin: u32,
    /// Error correction: `L`, `M`, `Q` or `H`.
    pub ecc: EcLevel,
}

impl QrOptions {
    /// Checks options as a request names them (absent ones take their defaults).
    pub fn parse(
        format: Option<&str>,
        size: Option<u32>,
        margin: Option<u32>,
        ecc: Option<&str>,
    ) -> Result<Self, Error> {
        let format = match format {
            None | Some("svg") => Format::Svg,
            Some("png") => Format::Png,
            Some(other) => {
                return Err(Error::bad_request(
                    "invalid_format",
                    format!("format {} must be svg or png", echo(other)),
                ));
            }
        };
        let size = size.unwrap_or(DEFAULT_SIZE);
        if !SIZES.contains(&size) {
            return Err(Error::bad_request(
                "invalid_size",
                format!("size must be {} to {} pixels", SIZES.start(), SIZES.end()),
            ));
        }
        let margin = margin.unwrap_or(DEFAULT_MARGIN);
        if margin > MAX_MARGIN {
            return Err(Error::bad_request(
                "invalid_margin",
                format!("margin must be 0 to {MAX_MARGIN} modules"),
            ));
        }
        let ecc = match ecc {
            None | Some("M") | Some("m") => EcLevel::M,
            Some("L") | Some("l") => EcLevel::L,
            Some("Q") | Some("q") => EcLevel::Q,
            Some("H") | Some("h") => EcLevel::H,
            Some(other) => {
                return Err(Error::bad_request(
                    "invalid_ecc",
                    format!("ecc {} must be L, M, Q or H", echo(other)),
                ));
            }
        };
        Ok(Self {
            format,
            size,
            margin,
            ecc,
        })
    }

    /// A strong validator of the image of `text` drawn with these options.
    pub fn etag(&self, text: &str) -> String {
        use sha2::{Digest, Sha256};
        let mut h = Sha256::new();
        h.update(b"qr v1\0");
        h.update(text.as_bytes());
        h.update(
            format!(
                "\0{}\0{}\0{}\0{:?}",
                self.format.name(),
                self.size,
                self.margin,
                self.ecc
            )
            .as_bytes(),
        );
        format!("\"{}\"", hex::encode(&h.finalize()[..16]))
    }
}

/// The symbol's modules, row by row (true: dark), and its width in modules.
fn modules(text: &str, ecc: EcLevel) -> Result<(Vec<bool>, usize), Error> {
    let code = QrCode::with_error_correction_level(text.as_bytes(), ecc)
        .map_err(|e| Error::Internal(format!("QR encoding failed: {e}")))?;
    let width = code.width();
    Ok((
        code.to_colors()
            .into_iter()
            .map(|c| c == Color::Dark)
            .collect(),
        width,
    ))
}

/// The image of `text` with `options`.
pub fn render(text: &str, options: &QrOptions) -> Result<Vec<u8>, Error> {
    let (dark, width) = modules(text, options.ecc)?;
    let margin = options.margin as usize;
    let side = width + 2 * margin;
    match options.format {
        Format::Svg => Ok(svg(&dark, width, margin, options.size).into_bytes()),
        Format::Png => png(&dark, width, side, margin, options.size),
    }
}

/// One path of the dark modules, a horizontal run per subpath, in a view box of modules.
fn svg(dark: &[bool], width: usize, margin: usize, size: u32) -> String {
    let side = width + 2 * margin;
    let mut path = String::with_capacity(dark.len() * 4);
    for y in 0..width {
        let row = &dark[y * width..(y + 1) * width];
        let mut x = 0;
        while x < width {
            if !row[x] {
                x += 1;
                continue;
            }
            let start = x;
            while x < width && row[x] {
                x += 1;
            }
            path.push_str(&format!(
                "M{} {}h{}v1h-{}z",
                start + margin,
                y + margin,
                x - start,
                x - start
            ));
        }
    }
    format!(
        "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{size}\" height=\"{size}\" viewBox=\"0 0 {side} {side}\" shape-rendering=\"crispEdges\">\
         <rect width=\"{side}\" height=\"{side}\" fill=\"#fff\"/><path fill=\"#000\" d=\"{path}\"/></svg>\n"
    )
}

/// A 1-bit grayscale PNG of about `size` pixels a side: each module a whole number of pixels
/// (at least one), so edges stay sharp.
fn png(
    dark: &[bool],
    width: usize,
    side: usize,
    margin: usize,
    size: u32,
) -> Result<Vec<u8>, Error> {
    let scale = (size as usize / side).max(1);
    let pixels = side * scale;
    let row_bytes = pixels.div_ceil(8);
    let mut data = vec![0u8; row_bytes * pixels];
    for py in 0..pixels {
        for px in 0..pixels {
            let (mx, my) = (px / scale, py / scale);
            let is_dark = mx >= margin
                && my >= margin
                && mx < margin + width
                && my < margin + width
                && dark[(my - margin) * width + (mx - margin)];
            if !is_dark {
                // 1 is white in 1-bit grayscale.
                data[py * row_bytes + px / 8] |= 0x80 >> (px % 8);
            }
        }
    }
    let mut out = Vec::new();
    let failed = |e: png::EncodingError| Error::Internal(format!("PNG encoding failed: {e}"));
    {
        let mut encoder = png::Encoder::new(&mut out, pixels as u32, pixels as u32);
        encoder.set_color(png::ColorType::Grayscale);
        encoder.set_depth(png::BitDepth::One);
        let mut writer = encoder.write_header().map_err(failed)?;
        writer.write_image_data(&data).map_err(failed)?;
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn options_are_checked() {
        let ok = QrOptions::parse(None, None, None, None).expect("defaults");
        assert_eq!(
            (ok.format, ok.size, ok.margin, ok.ecc),
            (Format::Svg, DEFAULT_SIZE, DEFAULT_MARGIN, EcLevel::M)
        );
        for (format, size, margin, ecc, code) in [
            (Some("gif"), None, None, None, "invalid_format"),
            (None, Some(10), None, None, "invalid_size"),
            (None, Some(5000), None, None, "invalid_size"),
            (None, None, Some(17), None, "invalid_margin"),
            (None, None, None, Some("X"), "invalid_ecc"),
        ] {
            assert_eq!(
                QrOptions::parse(format, size, margin, ecc)
                    .expect_err(code)
                    .code(),
                code
            );
        }
        let a = QrOptions::parse(Some("png"), Some(300), None, Some("H")).expect("valid");
        assert_ne!(a.etag("https://s.test/abc"), ok.etag("https://s.test/abc"));
        assert_ne!(ok.etag("https://s.test/abc"), ok.etag("https://s.test/abd"));
    }
}
