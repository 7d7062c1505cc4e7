//! How deeply a YAML text nests flow collections (`[` and `{`), found by a linear scan before
//! anything parses it.
//!
//! libyaml (under serde_yaml_ng) does work proportional to the flow depth for every token, and
//! reads a whole document before serde's recursion limit looks at it: n nested `[` cost n², a
//! minute for 100,000 levels. Block nesting (indentation) is not quadratic: its depth needs that
//! many lines of growing indentation.
//!
//! The scan never parses, so it cannot always know what a character means: a `'` at the start of
//! a line may open a quoted string or continue the plain scalar of the line before (that depends
//! on the indentation of collections it does not track), a line after `|` may be the block
//! scalar's text or the next key, a character after `!` may belong to the tag. Where the text
//! could mean two things the scan follows both readings and keeps the deeper, so it errs only
//! high: a text it passes cannot nest deeper for libyaml. Readings that libyaml refuses (`- `
//! inside `[...]`, `,` outside) are dropped, which keeps the estimate exact on ordinary files.

/// The most flow collections one inside another that a file may have. Resource documents nest
/// fewer than 10 (a `List`'s items, a rule's ports).
pub const MAX_DEPTH: usize = 64;

/// The first place where the text nests more than [`MAX_DEPTH`] flow collections.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TooDeep {
    pub line: usize,
    pub column: usize,
}

/// How many modes there are.
const MODES: usize = Mode::BlockText as usize + 1;

/// Where a reading of the text is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Mode {
    /// Between tokens.
    Gap,
    /// In a plain scalar.
    Plain,
    /// After blanks in a plain scalar (a `#` now starts a comment).
    PlainBlank,
    /// At the start of a line in a plain scalar, before its first non-blank.
    PlainBreak,
    Single,
    /// A `'` in a single-quoted scalar: a second `'` is a quote, anything else ends it.
    SingleEnd,
    Double,
    DoubleEscape,
    Comment,
    /// An anchor, alias or tag.
    Props,
    /// A block scalar's header (`|-2 # comment`), to the end of its line.
    BlockHeader,
    /// The indentation of a line that may be a block scalar's text.
    BlockIndent,
    /// A line of a block scalar's text.
    BlockText,
}

/// Every reading still possible: for each mode, in the block context and in a flow context,
/// the range of flow depths it may have (a flow depth is at least 1). Slot `2 × mode + flow`;
/// `used` has a bit per slot in use (usually one or two: the scan visits only those).
#[derive(Debug, Default, Clone, Copy)]
struct Readings {
    slots: [(usize, usize); 2 * MODES],
    used: u32,
}

impl Readings {
    fn add(&mut self, mode: Mode, lo: usize, hi: usize) {
        if lo == 0 {
            self.put(2 * mode as usize, 0, 0);
        }
        if hi >= 1 {
            self.put(2 * mode as usize + 1, lo.max(1), hi);
        }
    }

    fn put(&mut self, slot: usize, lo: usize, hi: usize) {
        let bit = 1 << slot;
        self.slots[slot] = match self.used & bit {
            0 => (lo, hi),
            _ => (self.slots[slot].0.min(lo), self.slots[slot].1.max(hi)),
        };
        self.used |= bit;
    }

    /// Every reading: its mode and depths.
    fn each(&self) -> impl Iterator<Item = (Mode, usize, usize)> + '_ {
        let mut used = self.used;
        std::iter::from_fn(move || {
            let slot = used.trailing_zeros() as usize;
            if slot >= 2 * MODES {
                return None;
            }
            used &= used - 1;
            let (lo, hi) = self.slots[slot];
            Some((MODE_LIST[slot / 2], lo, hi))
        })
    }

    fn is_empty(&self) -> bool {
        self.used == 0
    }

    fn deepest(&self) -> usize {
        self.each().map(|(_, _, hi)| hi).max().unwrap_or(0)
    }
}

const MODE_LIST: [Mode; MODES] = [
    Mode::Gap,
    Mode::Plain,
    Mode::PlainBlank,
    Mode::PlainBreak,
    Mode::Single,
    Mode::SingleEnd,
    Mode::Double,
    Mode::DoubleEscape,
    Mode::Comment,
    Mode::Props,
    Mode::BlockHeader,
    Mode::BlockIndent,
    Mode::BlockText,
];

/// Scans `text`; `Err` names the first place deeper than [`MAX_DEPTH`].
pub fn check(text: &str) -> Result<(), TooDeep> {
    scan(text, MAX_DEPTH).map(|_| ())
}

/// The deepest flow nesting of `text` as the scan estimates it, or the first place deeper than
/// `limit`.
fn scan(text: &str, limit: usize) -> Result<usize, TooDeep> {
    let bytes = text.as_bytes();
    let mut readings = Readings::default();
    readings.add(Mode::Gap, 0, 0);
    let (mut at, mut line, mut column, mut deepest) = (0, 1, 0, 0);
    while at < bytes.len() {
        let (byte, width) = char_at(bytes, at);
        if column == 0 && document_marker(&bytes[at..]) {
            // `---` or `...` ends every construct (libyaml stops at one inside a quoted string
            // or a flow collection).
            readings = Readings::default();
            readings.add(Mode::Gap, 0, 0);
            (at, column) = (at + 3, 3);
            continue;
        }
        let next = bytes.get(at + width).copied().unwrap_or(b'\n');
        let mut after = Readings::default();
        for (mode, lo, hi) in readings.each() {
            step(mode, lo, hi, byte, next, &mut after);
        }
        readings = after;
        deepest = deepest.max(readings.deepest());
        if deepest > limit {
            return Err(TooDeep {
                line,
                column: column + 1,
            });
        }
        if readings.is_empty() {
            break; // every reading is one libyaml refuses here: it reads no further
        }
        at += width;
        (line, column) = match byte {
            b'\n' => (line + 1, 0),
            _ => (line, column + 1),
        };
    }
    Ok(deepest)
}

/// The byte at `at` as the scan sees it, and how many bytes it takes: every line break libyaml
/// knows (`\r\n`, `\r`, NEL, LS, PS) is `\n`.
fn char_at(bytes: &[u8], at: usize) -> (u8, usize) {
    match &bytes[at..] {
        [b'\r', b'\n', ..] => (b'\n', 2),
        [b'\r', ..] => (b'\n', 1),
        [0xC2, 0x85, ..] => (b'\n', 2),
        [0xE2, 0x80, 0xA8 | 0xA9, ..] => (b'\n', 3),
        [byte, ..] => (*byte, 1),
        [] => (b'\n', 1),
    }
}

fn document_marker(rest: &[u8]) -> bool {
    (rest.starts_with(b"---") || rest.starts_with(b"..."))
        && rest
            .get(3)
            .is_none_or(|b| blank(*b) || *b == b'\r' || *b == b'\n')
}

fn blank(byte: u8) -> bool {
    byte == b' ' || byte == b'\t'
}

/// The readings after `byte` of one reading in `mode` at depths `lo..=hi` (0: block context).
fn step(mode: Mode, lo: usize, hi: usize, byte: u8, next: u8, out: &mut Readings) {
    let flow = lo > 0;
    match mode {
        Mode::Gap => gap(lo, hi, byte, next, out),
        Mode::Plain => plain(lo, hi, byte, next, out),
        Mode::PlainBlank => match byte {
            b'#' => out.add(Mode::Comment, lo, hi),
            _ => plain(lo, hi, byte, next, out),
        },
        Mode::PlainBreak => match byte {
            b' ' | b'\t' | b'\n' => out.add(Mode::PlainBreak, lo, hi),
            b'#' => out.add(Mode::Comment, lo, hi),
            // In a flow the scalar goes on; in the block context it goes on only if this line
            // is indented more than its collection, which the scan does not track: both.
            _ if flow => plain(lo, hi, byte, next, out),
            _ => {
                plain(lo, hi, byte, next, out);
                gap(lo, hi, byte, next, out);
            }
        },
        Mode::Single => match byte {
            b'\'' => out.add(Mode::SingleEnd, lo, hi),
            _ => out.add(Mode::Single, lo, hi),
        },
        Mode::SingleEnd => match byte {
            b'\'' => out.add(Mode::Single, lo, hi),
            _ => gap(lo, hi, byte, next, out),
        },
        Mode::Double => match byte {
            b'\\' => out.add(Mode::DoubleEscape, lo, hi),
            b'"' => out.add(Mode::Gap, lo, hi),
            _ => out.add(Mode::Double, lo, hi),
        },
        Mode::DoubleEscape => out.add(Mode::Double, lo, hi),
        Mode::Comment => match byte {
            b'\n' => out.add(Mode::Gap, lo, hi),
            _ => out.add(Mode::Comment, lo, hi),
        },
        Mode::Props => match byte {
            b' ' | b'\t' | b'\n' => gap(lo, hi, byte, next, out),
            // Which characters a tag or anchor may hold differs between libyaml versions.
            _ => {
                out.add(Mode::Props, lo, hi);
                gap(lo, hi, byte, next, out);
            }
        },
        Mode::BlockHeader => match byte {
            b'\n' => out.add(Mode::BlockIndent, 0, 0),
            _ => out.add(Mode::BlockHeader, 0, 0),
        },
        Mode::BlockIndent => match byte {
            b' ' | b'\t' | b'\n' => out.add(Mode::BlockIndent, 0, 0),
            // The scalar's text, or (less indented than it) what follows it: both.
            _ => {
                out.add(Mode::BlockText, 0, 0);
                gap(0, 0, byte, next, out);
            }
        },
        Mode::BlockText => match byte {
            b'\n' => out.add(Mode::BlockIndent, 0, 0),
            _ => out.add(Mode::BlockText, 0, 0),
        },
    }
}

/// A token starting with `byte` (libyaml's `fetch_next_token`).
fn gap(lo: usize, hi: usize, byte: u8, next: u8, out: &mut Readings) {
    let flow = lo > 0;
    let next_blank = blank(next) || next == b'\n';
    match byte {
        b' ' | b'\t' | b'\n' => out.add(Mode::Gap, lo, hi),
        b'#' | b'%' => out.add(Mode::Comment, lo, hi),
        b'[' | b'{' => out.add(Mode::Gap, lo + 1, hi + 1),
        b']' | b'}' => out.add(Mode::Gap, lo.saturating_sub(1), hi.saturating_sub(1)),
        // libyaml's parser refuses `,` outside a flow, `- ` and block scalars inside one, and
        // the reserved `@` and backquote anywhere: that reading ends here.
        b',' if !flow => {}
        b',' => out.add(Mode::Gap, lo, hi),
        b'-' if next_blank && flow => {}
        b'-' if next_blank => out.add(Mode::Gap, lo, hi),
        b'?' | b':' if flow || next_blank => out.add(Mode::Gap, lo, hi),
        b'*' | b'&' | b'!' => out.add(Mode::Props, lo, hi),
        b'|' | b'>' if flow => {}
        b'|' | b'>' => out.add(Mode::BlockHeader, 0, 0),
        b'@' | b'`' => {}
        b'\'' => out.add(Mode::Single, lo, hi),
        b'"' => out.add(Mode::Double, lo, hi),
        _ => out.add(Mode::Plain, lo, hi),
    }
}

/// A character in a plain scalar (libyaml's `scan_plain_scalar`).
fn plain(lo: usize, hi: usize, byte: u8, next: u8, out: &mut Readings) {
    let flow = lo > 0;
    let ends_value = blank(next) || next == b'\n' || (flow && b",?[]{}".contains(&next));
    match byte {
        b':' if ends_value => out.add(Mode::Gap, lo, hi),
        b',' | b'[' | b']' | b'{' | b'}' if flow => gap(lo, hi, byte, next, out),
        b' ' | b'\t' => out.add(Mode::PlainBlank, lo, hi),
        b'\n' => out.add(Mode::PlainBreak, lo, hi),
        _ => out.add(Mode::Plain, lo, hi),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn depth_of(text: &str) -> usize {
        scan(text, usize::MAX).expect("no limit")
    }

    #[test]
    fn ordinary_documents_are_measured_exactly() {
        let every_kind = include_str!("../../tests/resources/every-kind.yaml");
        assert_eq!(depth_of(every_kind), 1);
        assert_eq!(depth_of("a: {b: [1, {c: [x]}]}\n"), 4);
        assert_eq!(depth_of("a: '[[[[' # [[[\nb: \"[[\\\"[[\"\n"), 0);
        assert_eq!(depth_of("a: |\n  [[[[\n  ]]]]\nb: x\n"), 4, "both readings");
        assert_eq!(depth_of("a: it's [b\nc: d\n"), 0);
    }

    #[test]
    fn deep_nesting_is_refused_where_it_goes_too_deep() {
        let deep = format!("x: {}{}\n", "[".repeat(100_000), "]".repeat(100_000));
        assert_eq!(
            check(&deep),
            Err(TooDeep {
                line: 1,
                column: 68
            })
        );
        let mapping = format!("---\nx: {}1\n", "{a: ".repeat(65));
        assert_eq!(
            check(&mapping),
            Err(TooDeep {
                line: 2,
                column: 260
            })
        );
        let fine = format!("x: {}{}\n", "[".repeat(64), "]".repeat(64));
        assert_eq!(check(&fine), Ok(()));
    }

    /// Texts that hide brackets from a scan that takes each `'` or line one way only.
    #[test]
    fn quotes_and_lines_that_could_mean_two_things_cannot_hide_depth() {
        let deep = format!("[ \"]\" {}", "[ \"]\" ".repeat(70));
        let hidden = [
            // A plain scalar goes on in the next line, whose `'` is no quote.
            format!("a: foo\n  'x\nb: {deep}\nc: \"'\"\n"),
            // A block scalar's text holding a `'`.
            format!("a: |\n  '\n{deep}\n"),
            // A tag whose characters may include a quote.
            format!("a: !t'x {deep}\nb: \"'\"\n"),
            // Line breaks other than \n end a comment.
            format!("a: 1 # note\r{deep}\n"),
            format!("a: 1 # note\u{2028}{deep}\n"),
        ];
        for text in hidden {
            assert!(check(&text).is_err(), "passed:\n{text}");
        }
    }

    proptest::proptest! {
        /// On one line (no block structure) without `:` or `?` (no implicit mappings), every
        /// level of what serde_yaml_ng reads is a flow collection: the scan is never below it.
        #[test]
        fn never_below_what_libyaml_reads(body in "[\\[\\]{},'\" ab#&!*|>\\\\-]{0,40}") {
            let text = format!("x: {body}\n");
            if let Ok(value) = serde_yaml_ng::from_str::<serde_yaml_ng::Value>(&text) {
                let nested = nesting(&value).saturating_sub(1);
                proptest::prop_assert!(depth_of(&text) >= nested, "{text:?}: {nested}");
            }
        }
    }

    fn nesting(value: &serde_yaml_ng::Value) -> usize {
        use serde_yaml_ng::Value;
        match value {
            Value::Sequence(items) => 1 + items.iter().map(nesting).max().unwrap_or(0),
            Value::Mapping(map) => {
                let keys = map.keys().map(nesting);
                1 + map.values().map(nesting).chain(keys).max().unwrap_or(0)
            }
            Value::Tagged(tagged) => nesting(&tagged.value),
            _ => 0,
        }
    }
}
