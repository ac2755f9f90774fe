//! Where the SVG drawing's edge labels go. Laid out before any browser measures text,
//! so each label's box is estimated from its characters (generously); each label then
//! takes the first of its candidate places (along its edge, then beside it) whose box
//! meets no box and no label placed before it. Long labels (a route with many cases
//! to one node) are wrapped at their ` / ` separators.

/// An axis-aligned box: left, top, right, bottom.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(super) struct Rect {
    pub x0: f64,
    pub y0: f64,
    pub x1: f64,
    pub y1: f64,
}

impl Rect {
    pub(super) fn centred(x: f64, y: f64, width: f64, height: f64) -> Rect {
        Rect {
            x0: x - width / 2.0,
            y0: y - height / 2.0,
            x1: x + width / 2.0,
            y1: y + height / 2.0,
        }
    }

    fn meets(&self, other: &Rect) -> bool {
        self.x0 < other.x1 && other.x0 < self.x1 && self.y0 < other.y1 && other.y0 < self.y1
    }
}

/// Estimated size of 12 px sans-serif text: generous, as for the node boxes.
pub(super) const CHAR_WIDTH: f64 = 7.4;
pub(super) const LINE_HEIGHT: f64 = 15.0;
/// The white halo around a label's glyphs, and a little air.
const HALO: f64 = 3.0;
/// A line of a wrapped label holds this many characters at most (unless one case is
/// longer).
const WRAP: usize = 28;

/// A label's lines: `a / b / c` broken at its separators into lines of up to `WRAP`
/// characters.
pub(super) fn wrap(label: &str) -> Vec<String> {
    let mut lines: Vec<String> = Vec::new();
    for part in label.split(" / ") {
        match lines.last_mut() {
            Some(line) if line.chars().count() + 3 + part.chars().count() <= WRAP => {
                line.push_str(" / ");
                line.push_str(part);
            }
            Some(line) => {
                // The separator stays at the end of the line it breaks.
                line.push_str(" /");
                lines.push(part.to_string());
            }
            None => lines.push(part.to_string()),
        }
    }
    lines
}

/// The size of a label's box, halo included.
pub(super) fn size(lines: &[String]) -> (f64, f64) {
    let chars = lines.iter().map(|l| l.chars().count()).max().unwrap_or(0);
    (
        chars as f64 * CHAR_WIDTH + 2.0 * HALO,
        lines.len() as f64 * LINE_HEIGHT + 2.0 * HALO,
    )
}

/// The boxes placed so far (the nodes' and bars' first, then each label's).
pub(super) struct Placer {
    taken: Vec<Rect>,
}

impl Placer {
    pub(super) fn new(boxes: Vec<Rect>) -> Self {
        Placer { taken: boxes }
    }

    /// The centre of the first candidate where a box of this size is free (the first
    /// candidate when none is), and takes its box.
    pub(super) fn place(&mut self, candidates: &[(f64, f64)], size: (f64, f64)) -> (f64, f64) {
        let free = |(x, y): (f64, f64)| {
            let r = Rect::centred(x, y, size.0, size.1);
            r.x0 >= 0.0 && r.y0 >= 0.0 && !self.taken.iter().any(|t| t.meets(&r))
        };
        // When every candidate is taken, each is tried again further to either side.
        let shifted = (1..=8).flat_map(|k| {
            let step = k as f64 * (size.0 / 2.0 + 6.0);
            candidates
                .iter()
                .flat_map(move |(x, y)| [(x + step, *y), (x - step, *y)])
        });
        let at = candidates
            .iter()
            .copied()
            .chain(shifted)
            .find(|c| free(*c))
            .or_else(|| candidates.first().copied())
            .unwrap_or((0.0, 0.0));
        self.taken.push(Rect::centred(at.0, at.1, size.0, size.1));
        at
    }

    /// Every box placed: for the drawing's size.
    pub(super) fn boxes(&self) -> &[Rect] {
        &self.taken
    }
}

/// A point of the cubic Bézier curve from `p0` to `p3` with control points `p1`, `p2`.
pub(super) fn bezier(p: [(f64, f64); 4], t: f64) -> (f64, f64) {
    let u = 1.0 - t;
    let (a, b, c, d) = (u * u * u, 3.0 * u * u * t, 3.0 * u * t * t, t * t * t);
    (
        a * p[0].0 + b * p[1].0 + c * p[2].0 + d * p[3].0,
        a * p[0].1 + b * p[1].1 + c * p[2].1 + d * p[3].1,
    )
}

/// Candidate centres for a label of width `w` on a curve: points along it, nearer the
/// target first (edges fanning out of one node are farther apart there), each on the
/// curve and then just beside it on either side.
pub(super) fn along(curve: [(f64, f64); 4], w: f64) -> Vec<(f64, f64)> {
    const TS: [f64; 9] = [0.6, 0.45, 0.75, 0.3, 0.85, 0.2, 0.5, 0.7, 0.35];
    let mut out: Vec<(f64, f64)> = TS.iter().map(|t| bezier(curve, *t)).collect();
    for t in TS {
        let (x, y) = bezier(curve, t);
        out.push((x + w / 2.0 + 4.0, y));
        out.push((x - w / 2.0 - 4.0, y));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn long_labels_wrap_at_their_separators() {
        assert_eq!(wrap("allow"), vec!["allow"]);
        assert_eq!(
            wrap("load_simulation / run_simulation / get_results / default"),
            vec![
                "load_simulation /",
                "run_simulation / get_results /",
                "default"
            ]
        );
    }

    #[test]
    fn a_label_takes_the_first_free_place() {
        let mut p = Placer::new(vec![Rect::centred(50.0, 50.0, 20.0, 20.0)]);
        // The first candidate lies on the box: the second is taken.
        assert_eq!(
            p.place(&[(50.0, 50.0), (100.0, 50.0)], (10.0, 10.0)),
            (100.0, 50.0)
        );
        // Now that place is taken too: the same, moved aside by half a label and more.
        assert_eq!(p.place(&[(100.0, 50.0)], (10.0, 10.0)), (111.0, 50.0));
        assert_eq!(p.boxes().len(), 3);
        // Nowhere free at all: the first candidate.
        let mut full = Placer::new(vec![Rect::centred(0.0, 0.0, 1e6, 1e6)]);
        assert_eq!(
            full.place(&[(5.0, 5.0), (9.0, 9.0)], (10.0, 10.0)),
            (5.0, 5.0)
        );
    }
}
