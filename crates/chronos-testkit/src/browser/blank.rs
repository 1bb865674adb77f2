//! Deciding whether a screenshot shows anything.
//!
//! A page that failed to render (a server error page with no styles is still not blank, but a
//! crashed renderer, a stalled load or a console that forgot its HTML is) comes out as one colour
//! everywhere. Rendered text is anti-aliased, so even a few words give many distinct shades;
//! that is what the rule below relies on.

use std::collections::HashMap;

/// Fewer distinct colours than this and the picture counts as blank.
const MIN_COLOURS: usize = 4;
/// Fewer pixels off the most common colour than this share (1 in 2000, 700 pixels of a
/// 1400x1000 window) and the picture counts as blank: a stray caret or a 1-px border alone does
/// not make a page.
const MIN_OFF_DOMINANT: f64 = 0.0005;

/// What a screenshot holds, in numbers.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct Stats {
    pub(super) width: u32,
    pub(super) height: u32,
    pub(super) colours: usize,
    /// Share of pixels that differ from the most common colour, 0..=1.
    pub(super) off_dominant: f64,
}

impl Stats {
    /// `Err(reason)` when the picture is blank by the rule of this module.
    pub(super) fn judge(&self) -> Result<(), String> {
        if self.colours < MIN_COLOURS || self.off_dominant < MIN_OFF_DOMINANT {
            return Err(format!(
                "{}x{} px, {} distinct colour(s), {:.3}% of pixels off the most common colour \
                 (a page needs at least {MIN_COLOURS} colours and {:.3}%)",
                self.width,
                self.height,
                self.colours,
                self.off_dominant * 100.0,
                MIN_OFF_DOMINANT * 100.0
            ));
        }
        Ok(())
    }
}

/// Decodes a PNG and counts its colours.
pub(super) fn stats(png_bytes: &[u8]) -> Result<Stats, String> {
    let mut decoder = png::Decoder::new(std::io::Cursor::new(png_bytes));
    // Normalise palette, low bit depths and 16-bit channels to 8-bit samples, so one counting
    // loop below serves every colour type.
    decoder.set_transformations(png::Transformations::normalize_to_color8());
    let mut reader = decoder.read_info().map_err(|e| format!("not a PNG: {e}"))?;
    let size = reader
        .output_buffer_size()
        .ok_or("PNG too large to decode")?;
    let mut buf = vec![0u8; size];
    let frame = reader
        .next_frame(&mut buf)
        .map_err(|e| format!("PNG decode failed: {e}"))?;
    let channels = frame.color_type.samples();
    let pixels = &buf[..frame.buffer_size()];
    let mut counts: HashMap<[u8; 4], u64> = HashMap::new();
    let mut total = 0u64;
    for px in pixels.chunks_exact(channels) {
        let mut key = [0u8; 4];
        key[..channels].copy_from_slice(px);
        *counts.entry(key).or_default() += 1;
        total += 1;
    }
    let dominant = counts.values().copied().max().unwrap_or(0);
    let off_dominant = if total == 0 {
        0.0
    } else {
        (total - dominant) as f64 / total as f64
    };
    Ok(Stats {
        width: frame.width,
        height: frame.height,
        colours: counts.len(),
        off_dominant,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn encode(width: u32, height: u32, rgb: &[u8]) -> Vec<u8> {
        let mut out = Vec::new();
        {
            let mut encoder = png::Encoder::new(&mut out, width, height);
            encoder.set_color(png::ColorType::Rgb);
            encoder.set_depth(png::BitDepth::Eight);
            let mut writer = encoder.write_header().unwrap();
            writer.write_image_data(rgb).unwrap();
        }
        out
    }

    #[test]
    fn one_colour_everywhere_is_blank() {
        let png = encode(100, 50, &[255u8; 100 * 50 * 3]);
        let stats = stats(&png).unwrap();
        assert_eq!((stats.width, stats.height, stats.colours), (100, 50, 1));
        assert!(stats.judge().is_err());
    }

    #[test]
    fn a_few_stray_pixels_are_blank() {
        let mut rgb = vec![255u8; 100 * 100 * 3];
        for (i, shade) in [0u8, 60, 120, 180].iter().enumerate() {
            rgb[i * 3..i * 3 + 3].copy_from_slice(&[*shade; 3]);
        }
        let stats = stats(&encode(100, 100, &rgb)).unwrap();
        assert_eq!(stats.colours, 5);
        assert!(stats.judge().is_err(), "{stats:?}");
    }

    #[test]
    fn shaded_content_is_not_blank() {
        let mut rgb = vec![255u8; 100 * 100 * 3];
        for (i, px) in rgb.chunks_exact_mut(3).enumerate().take(2000) {
            px.copy_from_slice(&[(i % 7) as u8 * 30, 10, 200]);
        }
        let stats = stats(&encode(100, 100, &rgb)).unwrap();
        assert!(stats.judge().is_ok(), "{stats:?}");
    }

    #[test]
    fn garbage_is_an_error() {
        assert!(stats(b"not a png").is_err());
    }
}
