//! Chart text with the embedded font's real metrics: a drawing backend wrapper that measures
//! text the way a browser lays out the SVG (so legends and labels get boxes that fit), and for
//! PNG rasterises it itself with each glyph's side bearing and the font's kerning.
//!
//! Why not plotters' own text: its `ab_glyph` renderer places every glyph's ink at the pen
//! position, dropping the glyph's left side bearing, and rounds the pen to whole pixels, so
//! PNG labels read "co ld_pull" (narrow glyphs with wide bearings drift left). It also measures
//! text at a larger scale than the SVG backend writes (`font-size` = size / 1.24), so SVG
//! legend boxes did not match what a browser draws.

use ab_glyph::{Font, FontRef, PxScale, ScaleFont, point};
use plotters_backend::text_anchor::{HPos, VPos};
use plotters_backend::{
    BackendColor, BackendCoord, BackendStyle, BackendTextStyle, DrawingBackend, DrawingErrorKind,
};
use std::sync::OnceLock;

/// plotters' SVG backend writes `font-size` as the requested size divided by this; the PNG
/// uses the same em so both outputs have the same layout (plotters-svg 0.3.7, `draw_text`).
const SVG_EM_DIVISOR: f64 = 1.24;

/// The embedded font (DejaVu Sans 2.37; licence in `assets/DejaVuSans-LICENSE.txt`); the
/// charts register it with plotters, this module measures and draws with it.
pub(crate) static FONT: &[u8] = include_bytes!("../assets/DejaVuSans.ttf");

/// The parsed embedded font (the whole DejaVu Sans the PNGs draw with).
fn font() -> Option<&'static FontRef<'static>> {
    static PARSED: OnceLock<Option<FontRef<'static>>> = OnceLock::new();
    PARSED
        .get_or_init(|| FontRef::try_from_slice(FONT).ok())
        .as_ref()
}

/// One laid-out line: glyphs on a baseline at y = 0, and its advance width in pixels.
struct Line {
    glyphs: Vec<ab_glyph::Glyph>,
    width: f32,
    em: f32,
    x_height: f32,
}

fn layout(font: &FontRef<'static>, size: f64, text: &str) -> Line {
    let em = (size / SVG_EM_DIVISOR) as f32;
    // ab_glyph scales by the font's height (ascent − descent); convert an em size to it.
    let units_per_em = font.units_per_em().unwrap_or(2048.0);
    let scale = PxScale::from(em * font.height_unscaled() / units_per_em);
    let sf = font.as_scaled(scale);
    let mut x = 0.0f32;
    let mut prev = None;
    let mut glyphs = Vec::with_capacity(text.len());
    for c in text.chars() {
        let id = sf.glyph_id(c);
        if let Some(p) = prev {
            x += sf.kern(p, id);
        }
        glyphs.push(id.with_scale_and_position(scale, point(x, 0.0)));
        x += sf.h_advance(id);
        prev = Some(id);
    }
    let x_glyph = sf.scaled_glyph('x');
    let x_height = font
        .outline_glyph(x_glyph)
        .map_or(em * 0.55, |o| -o.px_bounds().min.y);
    Line {
        glyphs,
        width: x,
        em,
        x_height,
    }
}

/// A backend that measures text with the embedded font and, when `raster` is set, draws it
/// too; everything else goes to the wrapped backend unchanged.
pub(crate) struct Text<B> {
    pub inner: B,
    pub raster: bool,
}

impl<B: DrawingBackend> DrawingBackend for Text<B> {
    type ErrorType = B::ErrorType;

    fn get_size(&self) -> (u32, u32) {
        self.inner.get_size()
    }
    fn ensure_prepared(&mut self) -> Result<(), DrawingErrorKind<B::ErrorType>> {
        self.inner.ensure_prepared()
    }
    fn present(&mut self) -> Result<(), DrawingErrorKind<B::ErrorType>> {
        self.inner.present()
    }
    fn draw_pixel(
        &mut self,
        point: BackendCoord,
        color: BackendColor,
    ) -> Result<(), DrawingErrorKind<B::ErrorType>> {
        self.inner.draw_pixel(point, color)
    }
    fn draw_line<S: BackendStyle>(
        &mut self,
        from: BackendCoord,
        to: BackendCoord,
        style: &S,
    ) -> Result<(), DrawingErrorKind<B::ErrorType>> {
        self.inner.draw_line(from, to, style)
    }
    fn draw_rect<S: BackendStyle>(
        &mut self,
        upper_left: BackendCoord,
        bottom_right: BackendCoord,
        style: &S,
        fill: bool,
    ) -> Result<(), DrawingErrorKind<B::ErrorType>> {
        self.inner.draw_rect(upper_left, bottom_right, style, fill)
    }
    fn draw_path<S: BackendStyle, I: IntoIterator<Item = BackendCoord>>(
        &mut self,
        path: I,
        style: &S,
    ) -> Result<(), DrawingErrorKind<B::ErrorType>> {
        self.inner.draw_path(path, style)
    }
    fn draw_circle<S: BackendStyle>(
        &mut self,
        center: BackendCoord,
        radius: u32,
        style: &S,
        fill: bool,
    ) -> Result<(), DrawingErrorKind<B::ErrorType>> {
        self.inner.draw_circle(center, radius, style, fill)
    }
    fn fill_polygon<S: BackendStyle, I: IntoIterator<Item = BackendCoord>>(
        &mut self,
        vert: I,
        style: &S,
    ) -> Result<(), DrawingErrorKind<B::ErrorType>> {
        self.inner.fill_polygon(vert, style)
    }
    fn blit_bitmap(
        &mut self,
        pos: BackendCoord,
        (iw, ih): (u32, u32),
        src: &[u8],
    ) -> Result<(), DrawingErrorKind<B::ErrorType>> {
        self.inner.blit_bitmap(pos, (iw, ih), src)
    }

    fn estimate_text_size<S: BackendTextStyle>(
        &self,
        text: &str,
        style: &S,
    ) -> Result<(u32, u32), DrawingErrorKind<B::ErrorType>> {
        match font() {
            Some(f) => {
                let line = layout(f, style.size(), text);
                Ok((line.width.ceil() as u32, line.em.ceil() as u32))
            }
            None => self.inner.estimate_text_size(text, style),
        }
    }

    fn draw_text<S: BackendTextStyle>(
        &mut self,
        text: &str,
        style: &S,
        pos: BackendCoord,
    ) -> Result<(), DrawingErrorKind<B::ErrorType>> {
        let Some(f) = font().filter(|_| self.raster) else {
            return self.inner.draw_text(text, style, pos);
        };
        let color = style.color();
        if color.alpha == 0.0 {
            return Ok(());
        }
        let line = layout(f, style.size(), text);
        let dx = match style.anchor().h_pos {
            HPos::Left => 0.0,
            HPos::Center => -line.width / 2.0,
            HPos::Right => -line.width,
        };
        // The baseline where the SVG backend puts it: `dy` of 0.76em (top), 0.5ex (centre),
        // −0.5ex (bottom) below the anchor; a browser's ex is the font's x-height.
        let dy = match style.anchor().v_pos {
            VPos::Top => 0.76 * line.em,
            VPos::Center => 0.5 * line.x_height,
            VPos::Bottom => -0.5 * line.x_height,
        };
        let trans = style.transform();
        let (w, h) = self.inner.get_size();
        for g in line.glyphs {
            let Some(outline) = f.outline_glyph(g) else {
                continue;
            };
            let b = outline.px_bounds();
            let mut pixels = Vec::new();
            outline.draw(|x, y, coverage| pixels.push((x, y, coverage)));
            for (x, y, coverage) in pixels {
                if coverage <= 0.0 {
                    continue;
                }
                let rx = (b.min.x + x as f32 + dx).round() as i32;
                let ry = (b.min.y + y as f32 + dy).round() as i32;
                let (tx, ty) = trans.transform(rx, ry);
                let (px, py) = (pos.0 + tx, pos.1 + ty);
                if px < 0 || py < 0 || px >= w as i32 || py >= h as i32 {
                    continue;
                }
                self.inner.draw_pixel(
                    (px, py),
                    BackendColor {
                        alpha: color.alpha * f64::from(coverage.min(1.0)),
                        rgb: color.rgb,
                    },
                )?;
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn glyphs_keep_their_side_bearings_and_kerning() {
        let f = font().expect("the embedded font parses");
        let line = layout(f, 13.0, "AV");
        let sf = f.as_scaled(line.glyphs[0].scale);
        let (a, v) = (sf.glyph_id('A'), sf.glyph_id('V'));
        // DejaVu Sans kerns "AV" closer than the plain advances.
        assert!(sf.kern(a, v) < 0.0);
        assert!(line.glyphs[1].position.x < sf.h_advance(a));
        // "l" has a left side bearing: its ink starts right of the pen.
        let l = layout(f, 100.0, "l");
        let ink = f.outline_glyph(l.glyphs[0].clone()).unwrap().px_bounds();
        assert!(ink.min.x > l.glyphs[0].position.x, "{ink:?}");
        // A 13 px request is a 13 / 1.24 px em, as the SVG backend writes it.
        assert!((line.em - 13.0 / 1.24).abs() < 1e-4);
    }
}
