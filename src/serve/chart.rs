//! What the web view's bar charts share: the frame of a plot in its SVG view box, the grid with
//! its tick labels, the axes with their titles, and the step of an axis.

use std::fmt::Write;

/// A chart's size (its view box) and the margins around its plot.
pub(super) struct Frame {
    pub w: f64,
    pub h: f64,
    pub left: f64,
    pub right: f64,
    pub top: f64,
    pub bottom: f64,
}

impl Frame {
    /// The plot's width.
    pub(super) fn plot_width(&self) -> f64 {
        self.w - self.left - self.right
    }

    /// The plot's height.
    pub(super) fn plot_height(&self) -> f64 {
        self.h - self.top - self.bottom
    }

    /// The y of the plot's base line.
    pub(super) fn base(&self) -> f64 {
        self.top + self.plot_height()
    }

    /// The y of value `v` on an axis from 0 to `top`.
    pub(super) fn y(&self, v: f64, top: f64) -> f64 {
        self.base() - v / top * self.plot_height()
    }

    /// A grid line and its label (`label` of its value) at every `step` from 0 to `top`.
    pub(super) fn grid(&self, s: &mut String, step: f64, top: f64, label: impl Fn(f64) -> String) {
        let ticks = (top / step).round() as u32;
        for i in 0..=ticks {
            let v = step * f64::from(i);
            let y = self.y(v, top);
            let _ = write!(
                s,
                r#"<line class="grid" x1="{}" x2="{}" y1="{y:.1}" y2="{y:.1}"/><text class="tick" x="{}" y="{:.1}" text-anchor="end">{}</text>"#,
                self.left,
                self.w - self.right,
                self.left - 6.0,
                y + 4.0,
                label(v),
            );
        }
    }

    /// The two axes, the y axis's title (turned) and the x axis's below the plot.
    pub(super) fn axes(&self, s: &mut String, y_title: &str, x_title: &str) {
        let (left, top, base) = (self.left, self.top, self.base());
        let _ = write!(
            s,
            r#"<line class="axis" x1="{left}" x2="{left}" y1="{top}" y2="{base}"/><line class="axis" x1="{left}" x2="{}" y1="{base}" y2="{base}"/><text class="axis-title" x="14" y="{mid:.1}" text-anchor="middle" transform="rotate(-90 14 {mid:.1})">{y_title}</text><text class="axis-title" x="{:.1}" y="{}" text-anchor="middle">{x_title}</text>"#,
            self.w - self.right,
            left + self.plot_width() / 2.0,
            self.h - 6.0,
            mid = top + self.plot_height() / 2.0,
        );
    }
}

/// The step of an axis whose steps are about `raw`: the first of 1, 2, 5 and 10 times the power
/// of ten at or below `raw` that is at least `raw`.
pub(super) fn nice_step(raw: f64) -> f64 {
    let mag = 10f64.powf(raw.log10().floor());
    let nice = match raw / mag {
        f if f <= 1.0 => 1.0,
        f if f <= 2.0 => 2.0,
        f if f <= 5.0 => 5.0,
        _ => 10.0,
    };
    nice * mag
}
