//! The selector grammar, by recursive descent over the characters of the input:
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

use super::SelectorError;
use super::ast::Expr;

/// Parses a whole selector.
pub(super) fn parse(text: &str) -> Result<Expr, SelectorError> {
    let mut parser = Parser {
        chars: text.char_indices().map(|(_, c)| c).collect(),
        at: 0,
    };
    parser.skip_space();
    if parser.at_end() {
        return Ok(Expr::All);
    }
    let expr = parser.or()?;
    parser.skip_space();
    if !parser.at_end() {
        return Err(parser.unexpected("'&&', '||' or the end of the selector"));
    }
    Ok(expr)
}

/// True for the characters of a label name.
pub fn is_label_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | '/' | '-')
}

struct Parser {
    chars: Vec<char>,
    /// Index into `chars`: the character position errors report.
    at: usize,
}

impl Parser {
    fn or(&mut self) -> Result<Expr, SelectorError> {
        let mut operands = vec![self.and()?];
        while self.eat("||") {
            operands.push(self.and()?);
        }
        Ok(combine(operands, false))
    }

    fn and(&mut self) -> Result<Expr, SelectorError> {
        let mut operands = vec![self.unary()?];
        while self.eat("&&") {
            operands.push(self.unary()?);
        }
        Ok(combine(operands, true))
    }

    fn unary(&mut self) -> Result<Expr, SelectorError> {
        self.skip_space();
        if self.peek_str("!=") {
            return Err(self.unexpected("a label name, '!', '(', has() or all()"));
        }
        if self.eat("!") {
            return Ok(match self.unary()? {
                Expr::Not(inner) => *inner,
                other => Expr::Not(Box::new(other)),
            });
        }
        if self.eat("(") {
            let inner = self.or()?;
            self.expect(")", "')' to close the '('")?;
            return Ok(inner);
        }
        let start = self.at;
        let name = self.label("a label name, '!', '(', has() or all()")?;
        self.skip_space();
        if self.peek_str("(") {
            return self.function(start, &name);
        }
        self.comparison(name)
    }

    /// `has(label)` or `all()`.
    fn function(&mut self, start: usize, name: &str) -> Result<Expr, SelectorError> {
        self.eat("(");
        match name {
            "has" => {
                let label = self.label("a label name inside has()")?;
                self.expect(")", "')' after the label name of has(")?;
                Ok(Expr::Has(label))
            }
            "all" => {
                self.expect(")", "')': all() takes no arguments")?;
                Ok(Expr::All)
            }
            other => Err(SelectorError::new(
                start,
                format!("unknown function {other:?}: only has(label) and all() exist"),
            )),
        }
    }

    /// The operator and operand after a label name.
    fn comparison(&mut self, name: String) -> Result<Expr, SelectorError> {
        const EXPECTED: &str = "an operator: ==, !=, in, not in, contains, starts with, ends with";
        if self.eat("==") {
            return Ok(Expr::Equals(name, self.string()?));
        }
        if self.eat("!=") {
            return Ok(Expr::NotEquals(name, self.string()?));
        }
        let at = self.at;
        let word = if self.peek().is_some_and(is_label_char) {
            self.label(EXPECTED)?
        } else {
            return Err(self.unexpected(EXPECTED));
        };
        match word.as_str() {
            "in" => Ok(Expr::In(name, self.set()?)),
            "not" => {
                self.keyword("in", "'in' after 'not'")?;
                Ok(Expr::NotIn(name, self.set()?))
            }
            "contains" => Ok(Expr::Contains(name, self.string()?)),
            "starts" => {
                self.keyword("with", "'with' after 'starts'")?;
                Ok(Expr::StartsWith(name, self.string()?))
            }
            "ends" => {
                self.keyword("with", "'with' after 'ends'")?;
                Ok(Expr::EndsWith(name, self.string()?))
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
                members.push(self.string()?);
                if self.eat("}") {
                    break;
                }
                self.expect(",", "',' or '}' after a set member")?;
            }
        }
        members.sort();
        members.dedup();
        Ok(members)
    }

    /// A string literal in `"` or `'`, without escapes.
    fn string(&mut self) -> Result<String, SelectorError> {
        self.skip_space();
        let quote = match self.peek() {
            Some(q @ ('"' | '\'')) => q,
            _ => return Err(self.unexpected("a quoted string")),
        };
        let start = self.at;
        self.at += 1;
        let mut value = String::new();
        loop {
            match self.peek() {
                None => {
                    return Err(SelectorError::new(
                        start,
                        format!("unterminated string: no closing {quote}"),
                    ));
                }
                Some(c) if c == quote => break,
                Some(c) => value.push(c),
            }
            self.at += 1;
        }
        self.at += 1;
        Ok(value)
    }

    /// A label name (also used for the words of operators).
    fn label(&mut self, expected: &str) -> Result<String, SelectorError> {
        self.skip_space();
        let start = self.at;
        while self.peek().is_some_and(is_label_char) {
            self.at += 1;
        }
        if self.at == start {
            return Err(self.unexpected(expected));
        }
        Ok(self.chars[start..self.at].iter().collect())
    }

    /// A word that must come next, as a whole word.
    fn keyword(&mut self, word: &str, expected: &str) -> Result<(), SelectorError> {
        let at = self.at;
        match self.label(expected) {
            Ok(found) if found == word => Ok(()),
            _ => {
                self.at = at;
                self.skip_space();
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
        if self.peek_str(token) {
            self.at += token.chars().count();
            true
        } else {
            false
        }
    }

    fn peek_str(&self, token: &str) -> bool {
        let rest = self.chars.get(self.at..).unwrap_or_default();
        token.chars().count() <= rest.len() && token.chars().zip(rest).all(|(t, c)| t == *c)
    }

    fn peek(&self) -> Option<char> {
        self.chars.get(self.at).copied()
    }

    fn at_end(&self) -> bool {
        self.at >= self.chars.len()
    }

    fn skip_space(&mut self) {
        while self.peek().is_some_and(char::is_whitespace) {
            self.at += 1;
        }
    }

    /// "expected X, found Y" at the current position.
    fn unexpected(&mut self, expected: &str) -> SelectorError {
        self.skip_space();
        SelectorError::new(
            self.at,
            format!("expected {expected}, found {}", self.found()),
        )
    }

    /// What is at the current position, for error messages.
    fn found(&self) -> String {
        let Some(c) = self.peek() else {
            return "the end of the selector".to_owned();
        };
        if is_label_char(c) {
            let word: String = self.chars[self.at..]
                .iter()
                .take_while(|c| is_label_char(**c))
                .collect();
            return format!("{word:?}");
        }
        let two: String = self.chars[self.at..].iter().take(2).collect();
        match two.as_str() {
            "==" | "!=" | "&&" | "||" => format!("'{two}'"),
            _ => format!("{c:?}"),
        }
    }
}

/// One operand stays itself; several are flattened (`a && (b && c)` is `a && b && c`), sorted
/// and deduplicated by canonical text, so equal selectors have equal canonical forms.
fn combine(operands: Vec<Expr>, and: bool) -> Expr {
    let mut keyed: Vec<(String, Expr)> = operands
        .into_iter()
        .flat_map(|operand| match (operand, and) {
            (Expr::And(inner), true) | (Expr::Or(inner), false) => inner,
            (operand, _) => vec![operand],
        })
        .map(|operand| (operand.to_string(), operand))
        .collect();
    keyed.sort_by(|a, b| a.0.cmp(&b.0));
    keyed.dedup_by(|a, b| a.0 == b.0);
    let mut operands: Vec<Expr> = keyed.into_iter().map(|(_, operand)| operand).collect();
    match (operands.len(), and) {
        (1, _) => operands.remove(0),
        (_, true) => Expr::And(operands),
        (_, false) => Expr::Or(operands),
    }
}
