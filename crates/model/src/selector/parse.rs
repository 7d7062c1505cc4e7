//! The selector grammar, by recursive descent over the bytes of the input:
//!
//! ```text
//! selector := ε | or
//! or       := and ("||" and)*
//! and      := unary ("&&" unary)*
//! unary    := "!" unary | "(" or ")" | "all" "(" ")" | "has" "(" label ")" | label op
//! op       := "==" str | "!=" str | "in" set | "not" "in" set
//!           | "contains" str | "starts" "with" str | "ends" "with" str
//! set      := "{" [str ("," str)*] "}"
//! str      := '"' [^"]* '"' | "'" [^']* "'"
//! label    := [a-zA-Z0-9_./-]+
//! ```
//!
//! Cost: one pass, no backtracking beyond a word; names and values are sliced from the input
//! and copied once into the tree. The canonical text is written bottom-up as the tree is built
//! (an operand's text is also its sort key), into one scratch buffer: a node's text is a range
//! of it, `&&` and `||` append their joined operands, `!` appends or (double negation) narrows.
//! Only the root's text is copied out. Every token is ASCII, so positions are byte offsets,
//! turned into the character positions errors report only when an error is made.

use std::cell::Cell;
use std::ops::Range;

use super::ast::{Expr, Name, push_leaf};
use super::error::SelectorError;

/// The parser's working buffers, kept between parses on each thread: a policy update parses
/// several selectors, and allocating the two buffers for each was a fifth of a parse.
#[derive(Default)]
struct Scratch {
    out: String,
    names: String,
    operands: Vec<(Range<usize>, Expr)>,
}

thread_local! {
    static SCRATCH: Cell<Scratch> = const {
        Cell::new(Scratch {
            out: String::new(),
            names: String::new(),
            operands: Vec::new(),
        })
    };
}

/// Buffers larger than this (a selector of many kilobytes) are not kept.
const KEEP: usize = 16 * 1024;

/// Parses a whole selector into its tree and canonical text.
pub(super) fn parse(text: &str) -> Result<Parsed, SelectorError> {
    if u32::try_from(text.len()).is_err() {
        // Names are kept at `u32` offsets.
        return Err(SelectorError::new(0, "longer than 4 GiB"));
    }
    let Scratch {
        mut out,
        mut names,
        operands,
    } = SCRATCH.take();
    out.clear();
    names.clear();
    let mut parser = Parser {
        text,
        bytes: text.as_bytes(),
        at: 0,
        // Texts of the leaves, then of each level of `&&` / `||` above them.
        out,
        names,
        operands,
        depth: 0,
    };
    let parsed = parser.parse();
    let Parser {
        out,
        names,
        mut operands,
        ..
    } = parser;
    if out.capacity() + names.capacity() <= KEEP && operands.capacity() <= KEEP / 64 {
        // A successful parse empties it; an error may leave operands behind.
        operands.clear();
        SCRATCH.set(Scratch {
            out,
            names,
            operands,
        });
    }
    parsed
}

impl Parser<'_> {
    /// The whole text: the tree and the root's text as the canonical form.
    fn parse(&mut self) -> Result<Parsed, SelectorError> {
        self.skip_space();
        if self.at_end() {
            return Ok(Parsed {
                expr: Expr::All,
                text: "all()".to_owned(),
                split: 5,
            });
        }
        let node = self.or()?;
        self.skip_space();
        if !self.at_end() {
            return Err(self.unexpected("'&&', '||' or the end of the selector"));
        }
        let expr = self.expr_of(node.kind);
        // The canonical text and the names in one allocation.
        let canonical = &self.out[node.text];
        let mut text = String::with_capacity(canonical.len() + self.names.len());
        text.push_str(canonical);
        text.push_str(&self.names);
        Ok(Parsed {
            expr,
            split: canonical.len(),
            text,
        })
    }
}

/// A parsed selector: its tree, and its canonical text followed by the names the tree's
/// [`Name`]s are in (from `split`).
pub(super) struct Parsed {
    pub(super) expr: Expr,
    pub(super) text: String,
    pub(super) split: usize,
}

/// True for the characters of a label name.
pub fn is_label_char(c: char) -> bool {
    c.is_ascii() && is_label_byte(c as u8)
}

fn is_label_byte(b: u8) -> bool {
    LABEL_BYTES[usize::from(b)]
}

/// `is_label_byte` as a table: the scan of names is the parser's inner loop.
const LABEL_BYTES: [bool; 256] = {
    let mut table = [false; 256];
    let mut b = 0;
    while b < 256 {
        let c = b as u8;
        table[b] = c.is_ascii_alphanumeric() || matches!(c, b'_' | b'.' | b'/' | b'-');
        b += 1;
    }
    table
};

/// An expression and the range of its canonical text in the parser's buffer.
struct Node {
    text: Range<usize>,
    kind: Kind,
}

enum Kind {
    Expr(Expr),
    /// `&&` (`and`) or `||` of two or more operands, sorted and deduplicated: the parser's
    /// `operands[start..]`, each with its text, left there until the parent knows whether to
    /// flatten them into its own operands (they are already in place) or not.
    Group {
        and: bool,
        start: usize,
    },
}

struct Parser<'t> {
    text: &'t str,
    bytes: &'t [u8],
    /// Byte offset into `text`, always at a character boundary.
    at: usize,
    /// The canonical texts of the nodes built so far.
    out: String,
    /// The label names of the tree, one after the other (see [`Name`]).
    names: String,
    /// A stack of the operands of the `&&` and `||` being parsed: each takes the part above
    /// what was there when it started. One allocation for all the operators of a selector.
    operands: Vec<(Range<usize>, Expr)>,
    /// How many `(` and `!` enclose the current position: each is a level of recursion.
    depth: usize,
}

/// The deepest nesting of `(` and `!` accepted. Each level is a few stack frames, so without a
/// bound a selector of a million `(` (a policy value anyone with etcd write access can store)
/// overflows the stack and aborts Felix; real selectors nest a handful of levels.
pub const MAX_DEPTH: usize = 100;

impl<'t> Parser<'t> {
    fn or(&mut self) -> Result<Node, SelectorError> {
        let start = self.operands.len();
        let first = self.and()?;
        if !self.eat("||") {
            return Ok(first);
        }
        self.add_operand(first, false);
        loop {
            let next = self.and()?;
            self.add_operand(next, false);
            if !self.eat("||") {
                return Ok(self.combine(start, false));
            }
        }
    }

    fn and(&mut self) -> Result<Node, SelectorError> {
        let start = self.operands.len();
        let first = self.unary()?;
        if !self.eat("&&") {
            return Ok(first);
        }
        self.add_operand(first, true);
        loop {
            let next = self.unary()?;
            self.add_operand(next, true);
            if !self.eat("&&") {
                return Ok(self.combine(start, true));
            }
        }
    }

    fn unary(&mut self) -> Result<Node, SelectorError> {
        self.skip_space();
        if self.bytes[self.at..].starts_with(b"!=") {
            return Err(self.unexpected("a label name, '!', '(', has() or all()"));
        }
        if self.eat("!") {
            let inner = self.nested(Self::unary)?;
            return Ok(self.negate(inner));
        }
        if self.eat("(") {
            let inner = self.nested(Self::or)?;
            self.expect(")", "')' to close the '('")?;
            return Ok(inner);
        }
        let start = self.at;
        let name = self.label("a label name, '!', '(', has() or all()")?;
        self.skip_space();
        if self.peek() == Some(b'(') {
            return self.function(start, name);
        }
        let expr = self.comparison(name)?;
        Ok(self.leaf(expr))
    }

    /// `parse` one level deeper, refused past [`MAX_DEPTH`] (the `(` or `!` just read is
    /// where the error points).
    fn nested(
        &mut self,
        parse: fn(&mut Self) -> Result<Node, SelectorError>,
    ) -> Result<Node, SelectorError> {
        if self.depth == MAX_DEPTH {
            return Err(SelectorError::new(
                self.position(self.at - 1),
                format!("nested more than {MAX_DEPTH} levels deep ('(' and '!')"),
            ));
        }
        self.depth += 1;
        let node = parse(self);
        self.depth -= 1;
        node
    }

    /// `has(label)` or `all()`.
    fn function(&mut self, start: usize, name: &str) -> Result<Node, SelectorError> {
        self.at += 1;
        match name {
            "has" => {
                let label = self.label("a label name inside has()")?;
                self.expect(")", "')' after the label name of has(")?;
                let has = Expr::Has(Name::new(&mut self.names, label));
                Ok(self.leaf(has))
            }
            "all" => {
                self.expect(")", "')': all() takes no arguments")?;
                Ok(self.leaf(Expr::All))
            }
            other => Err(SelectorError::new(
                self.position(start),
                format!("unknown function {other:?}: only has(label) and all() exist"),
            )),
        }
    }

    /// The operator and operand after a label name.
    fn comparison(&mut self, name: &str) -> Result<Expr, SelectorError> {
        const EXPECTED: &str = "an operator: ==, !=, in, not in, contains, starts with, ends with";
        if self.eat("==") {
            return Ok(Expr::Equals(
                Name::new(&mut self.names, name),
                self.string()?.to_owned(),
            ));
        }
        if self.eat("!=") {
            return Ok(Expr::NotEquals(
                Name::new(&mut self.names, name),
                self.string()?.to_owned(),
            ));
        }
        let at = self.at;
        if !self.peek().is_some_and(is_label_byte) {
            return Err(self.unexpected(EXPECTED));
        }
        let name = Name::new(&mut self.names, name);
        match self.label(EXPECTED)? {
            "in" => Ok(Expr::In(name, self.set()?)),
            "not" => {
                self.keyword("in", "'in' after 'not'")?;
                Ok(Expr::NotIn(name, self.set()?))
            }
            "contains" => Ok(Expr::Contains(name, self.string()?.to_owned())),
            "starts" => {
                self.keyword("with", "'with' after 'starts'")?;
                Ok(Expr::StartsWith(name, self.string()?.to_owned()))
            }
            "ends" => {
                self.keyword("with", "'with' after 'ends'")?;
                Ok(Expr::EndsWith(name, self.string()?.to_owned()))
            }
            _ => {
                self.at = at;
                Err(self.unexpected(EXPECTED))
            }
        }
    }

    /// `{"a", "b"}`, sorted and deduplicated.
    fn set(&mut self) -> Result<Vec<String>, SelectorError> {
        self.expect("{", "'{' to start the set")?;
        let mut members = Vec::new();
        if !self.eat("}") {
            loop {
                members.push(self.string()?.to_owned());
                if self.eat("}") {
                    break;
                }
                self.expect(",", "',' or '}' after a set member")?;
            }
        }
        members.sort_unstable();
        members.dedup();
        Ok(members)
    }

    /// A string literal in `"` or `'`, without escapes.
    fn string(&mut self) -> Result<&'t str, SelectorError> {
        self.skip_space();
        let quote = match self.peek() {
            Some(q @ (b'"' | b'\'')) => q,
            _ => return Err(self.unexpected("a quoted string")),
        };
        let body = self.at + 1;
        // Bytes of multi-byte characters are never ASCII, so this finds the closing quote.
        match self.bytes[body..].iter().position(|&b| b == quote) {
            Some(len) => {
                self.at = body + len + 1;
                Ok(&self.text[body..body + len])
            }
            None => Err(SelectorError::new(
                self.position(self.at),
                format!("unterminated string: no closing {}", quote as char),
            )),
        }
    }

    /// A label name (also used for the words of operators).
    fn label(&mut self, expected: &str) -> Result<&'t str, SelectorError> {
        self.skip_space();
        let start = self.at;
        while self.peek().is_some_and(is_label_byte) {
            self.at += 1;
        }
        if self.at == start {
            return Err(self.unexpected(expected));
        }
        Ok(&self.text[start..self.at])
    }

    /// A word that must come next, as a whole word.
    fn keyword(&mut self, word: &str, expected: &str) -> Result<(), SelectorError> {
        let at = self.at;
        match self.label(expected) {
            Ok(found) if found == word => Ok(()),
            _ => {
                self.at = at;
                Err(self.unexpected(expected))
            }
        }
    }

    fn expect(&mut self, token: &str, expected: &str) -> Result<(), SelectorError> {
        if self.eat(token) {
            Ok(())
        } else {
            Err(self.unexpected(expected))
        }
    }

    /// Consumes `token` (after whitespace) if it comes next.
    fn eat(&mut self, token: &str) -> bool {
        self.skip_space();
        let found = self.bytes[self.at..].starts_with(token.as_bytes());
        if found {
            self.at += token.len();
        }
        found
    }

    fn peek(&self) -> Option<u8> {
        self.bytes.get(self.at).copied()
    }

    fn at_end(&self) -> bool {
        self.at >= self.bytes.len()
    }

    /// Skips whitespace as `char::is_whitespace` defines it. Called before every token, and
    /// usually there is none or one space: that is decided inline.
    #[inline(always)] // measured: not inlining it costs a tenth of the parse
    fn skip_space(&mut self) {
        if self
            .peek()
            .is_some_and(|b| b == b' ' || b >= 0x80 || (b'\t'..=b'\r').contains(&b))
        {
            self.skip_spaces();
        }
    }

    fn skip_spaces(&mut self) {
        while let Some(b) = self.peek() {
            if matches!(b, b' ' | b'\t' | b'\n' | b'\r' | 0x0b | 0x0c) {
                self.at += 1;
            } else if b >= 0x80 {
                match self.text[self.at..].chars().next() {
                    Some(c) if c.is_whitespace() => self.at += c.len_utf8(),
                    _ => break,
                }
            } else {
                break;
            }
        }
    }

    /// The character position (what errors report) of a byte offset.
    fn position(&self, byte: usize) -> usize {
        self.text[..byte].chars().count()
    }

    /// "expected X, found Y" at the current position.
    fn unexpected(&mut self, expected: &str) -> SelectorError {
        self.skip_space();
        SelectorError::new(
            self.position(self.at),
            format!("expected {expected}, found {}", self.found()),
        )
    }

    /// What is at the current position, for error messages.
    fn found(&self) -> String {
        let rest = &self.text[self.at..];
        let Some(c) = rest.chars().next() else {
            return "the end of the selector".to_owned();
        };
        if is_label_char(c) {
            let end = rest.bytes().position(|b| !is_label_byte(b));
            return format!("{:?}", &rest[..end.unwrap_or(rest.len())]);
        }
        match rest.get(..2) {
            Some(two @ ("==" | "!=" | "&&" | "||")) => format!("'{two}'"),
            _ => format!("{c:?}"),
        }
    }
}

impl Parser<'_> {
    fn leaf(&mut self, expr: Expr) -> Node {
        let start = self.out.len();
        push_leaf(&mut self.out, &self.names, &expr);
        Node {
            text: start..self.out.len(),
            kind: Kind::Expr(expr),
        }
    }

    /// `!node`, without double negation.
    fn negate(&mut self, node: Node) -> Node {
        let Range { start, end } = node.text;
        match self.expr_of(node.kind) {
            // Undo what the `!` added: `!x` or `!(x)`.
            Expr::Not(inner) if inner.is_atom() => Node {
                text: start + 1..end,
                kind: Kind::Expr(*inner),
            },
            Expr::Not(inner) => Node {
                text: start + 2..end - 1,
                kind: Kind::Expr(*inner),
            },
            inner => {
                let text = self.out.len();
                let atom = inner.is_atom();
                self.out.push_str(if atom { "!" } else { "!(" });
                self.out.extend_from_within(start..end);
                if !atom {
                    self.out.push(')');
                }
                Node {
                    text: text..self.out.len(),
                    kind: Kind::Expr(Expr::Not(Box::new(inner))),
                }
            }
        }
    }

    /// The expression of a node, taking a group's operands off the stack.
    fn expr_of(&mut self, kind: Kind) -> Expr {
        match kind {
            Kind::Expr(expr) => expr,
            Kind::Group { and, start } => {
                let operands = self.operands.drain(start..).map(|(_, e)| e).collect();
                if and {
                    Expr::And(operands)
                } else {
                    Expr::Or(operands)
                }
            }
        }
    }

    /// Adds an operand of `&&` (`and`) or `||` to the stack, flattening one of the same
    /// operator: `a && (b && c)` is `a && b && c`.
    fn add_operand(&mut self, node: Node, and: bool) {
        match node.kind {
            // Its operands are on top of the stack, just above ours: already in place.
            Kind::Group { and: same, .. } if same == and => {}
            // Only after `!!` or deduplication down to one operand; rare, so rendered again.
            Kind::Expr(Expr::And(inner)) if and => self.add_rendered(inner),
            Kind::Expr(Expr::Or(inner)) if !and => self.add_rendered(inner),
            kind => {
                let expr = self.expr_of(kind);
                self.operands.push((node.text, expr));
            }
        }
    }

    fn add_rendered(&mut self, inner: Vec<Expr>) {
        for expr in inner {
            let start = self.out.len();
            expr.render(&self.names, &mut self.out);
            self.operands.push((start..self.out.len(), expr));
        }
    }

    /// The operands from `start` up (two or more) become one node: sorted and deduplicated by
    /// canonical text, so equal selectors have equal canonical forms, and joined.
    fn combine(&mut self, start: usize, and: bool) -> Node {
        let (out, operands) = (&self.out, &mut self.operands);
        operands[start..].sort_unstable_by(|a, b| out[a.0.clone()].cmp(&out[b.0.clone()]));
        let mut kept = start + 1;
        for index in start + 1..operands.len() {
            if out[operands[index].0.clone()] != out[operands[kept - 1].0.clone()] {
                operands.swap(index, kept);
                kept += 1;
            }
        }
        operands.truncate(kept);
        if kept == start + 1 {
            let (text, expr) = operands.pop().expect("one operand left");
            return Node {
                text,
                kind: Kind::Expr(expr),
            };
        }
        let (op, binding) = if and { (" && ", 1) } else { (" || ", 0) };
        let text = self.out.len();
        for (index, (part, expr)) in self.operands[start..].iter().enumerate() {
            if index > 0 {
                self.out.push_str(op);
            }
            let parenthesise = expr.binding() < binding;
            if parenthesise {
                self.out.push('(');
            }
            self.out.extend_from_within(part.clone());
            if parenthesise {
                self.out.push(')');
            }
        }
        Node {
            text: text..self.out.len(),
            kind: Kind::Group { and, start },
        }
    }
}
