//! Byte offsets <-> LSP positions. The checker speaks byte spans; LSP speaks lines and
//! UTF-16 code units (its default encoding, which every client supports).

use lsp_types::{Position, Range};

/// Where each line of a text starts, to turn offsets into positions and back.
pub(crate) struct LineIndex<'t> {
    text: &'t str,
    starts: Vec<usize>,
}

impl<'t> LineIndex<'t> {
    pub(crate) fn new(text: &'t str) -> Self {
        let starts = std::iter::once(0)
            .chain(text.match_indices('\n').map(|(i, _)| i + 1))
            .collect();
        Self { text, starts }
    }

    /// The position of a byte offset; an offset past the end or inside a character is
    /// moved back to a character boundary, so a stale span never panics.
    pub(crate) fn position(&self, offset: usize) -> Position {
        let mut offset = offset.min(self.text.len());
        while !self.text.is_char_boundary(offset) {
            offset -= 1;
        }
        let line = self.starts.partition_point(|&s| s <= offset) - 1;
        let start = self.starts[line];
        let character = self.text[start..offset]
            .chars()
            .map(char::len_utf16)
            .sum::<usize>();
        Position::new(line as u32, character as u32)
    }

    pub(crate) fn range(&self, span: &std::ops::Range<usize>) -> Range {
        Range::new(
            self.position(span.start),
            self.position(span.end.max(span.start)),
        )
    }

    /// The byte offset of a position; a line past the end gives the text's end, a
    /// character past the line's end gives the line's end.
    pub(crate) fn offset(&self, pos: Position) -> usize {
        let Some(&start) = self.starts.get(pos.line as usize) else {
            return self.text.len();
        };
        let end = self
            .starts
            .get(pos.line as usize + 1)
            .map_or(self.text.len(), |&next| next - 1);
        let mut units = 0;
        for (i, c) in self.text[start..end].char_indices() {
            if units >= pos.character as usize {
                return start + i;
            }
            units += c.len_utf16();
        }
        end
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_utf16_units_and_survives_stale_offsets() {
        let text = "a = 1\nb = \"é😀x\"\n";
        let lines = LineIndex::new(text);
        let x = text.find('x').unwrap();
        // `b = "` is 5 units, `é` one, the emoji two.
        assert_eq!(lines.position(x), Position::new(1, 8));
        assert_eq!(lines.offset(Position::new(1, 8)), x);
        assert_eq!(lines.position(999), Position::new(2, 0));
        // Inside the emoji: moved back to its start.
        assert_eq!(lines.position(x - 1), Position::new(1, 6));
        assert_eq!(lines.offset(Position::new(9, 0)), text.len());
        assert_eq!(lines.offset(Position::new(0, 99)), 5);
    }
}
