//! Secrets in DDL statements: the passwords of `CREATE USER ... PASSWORD '...'`,
//! `ALTER USER ... PASSWORD '...'`, `IDENTIFIED BY ...`, `CREATE/ALTER SERVER (... PASSWORD=...)`
//! and the password field of `DBLINK('host:port:db:user:password:...', ...)` connection
//! strings. CUBRID logs every DDL statement in clear text; change events carry them redacted
//! unless asked otherwise.
//!
//! The statement is tokenized just enough to tell string literals, quoted identifiers and
//! comments from keywords, so a word `password` inside a literal or a column named `password`
//! is left alone.

/// What replaces a secret.
pub const MASK: &str = "***";

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Tok {
    /// A bare word (keyword or identifier).
    Word,
    /// `'...'` (with `''` escapes).
    Literal,
    /// `"..."`, `` `...` `` or `[...]`.
    Quoted,
    /// One punctuation character.
    Punct,
}

/// Byte ranges of the statement's tokens, comments and white space skipped.
fn tokens(s: &str) -> Vec<(Tok, usize, usize)> {
    let b = s.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    while i < b.len() {
        let c = b[i];
        let start = i;
        if c.is_ascii_whitespace() {
            i += 1;
        } else if (c == b'-' && b.get(i + 1) == Some(&b'-')) || (c == b'/' && b.get(i + 1) == Some(&b'/')) {
            while i < b.len() && b[i] != b'\n' {
                i += 1;
            }
        } else if c == b'/' && b.get(i + 1) == Some(&b'*') {
            i += 2;
            while i < b.len() && !(b[i] == b'*' && b.get(i + 1) == Some(&b'/')) {
                i += 1;
            }
            i = (i + 2).min(b.len());
        } else if c == b'\'' {
            i += 1;
            loop {
                match b.get(i) {
                    None => break,
                    Some(b'\'') if b.get(i + 1) == Some(&b'\'') => i += 2,
                    Some(b'\'') => {
                        i += 1;
                        break;
                    }
                    Some(_) => i += 1,
                }
            }
            out.push((Tok::Literal, start, i));
        } else if c == b'"' || c == b'`' || c == b'[' {
            let close = if c == b'[' { b']' } else { c };
            i += 1;
            while i < b.len() && b[i] != close {
                i += 1;
            }
            i = (i + 1).min(b.len());
            out.push((Tok::Quoted, start, i));
        } else if c.is_ascii_alphanumeric() || c == b'_' || c >= 0x80 {
            while i < b.len() && (b[i].is_ascii_alphanumeric() || b[i] == b'_' || b[i] >= 0x80) {
                i += 1;
            }
            out.push((Tok::Word, start, i));
        } else {
            i += 1;
            out.push((Tok::Punct, start, i));
        }
    }
    out
}

/// The statement with its secrets replaced by [`MASK`] (string literals keep their quotes).
/// Returns the statement unchanged (borrowed) when it holds none.
pub fn redact_secrets(statement: &str) -> std::borrow::Cow<'_, str> {
    let toks = tokens(statement);
    let word = |k: usize, w: &str| {
        toks.get(k).is_some_and(|&(t, a, b)| t == Tok::Word && statement[a..b].eq_ignore_ascii_case(w))
    };
    let punct = |k: usize, p: &str| toks.get(k).is_some_and(|&(t, a, b)| t == Tok::Punct && &statement[a..b] == p);
    // Byte ranges to replace, with their replacement.
    let mut cuts: Vec<(usize, usize, String)> = Vec::new();
    for k in 0..toks.len() {
        // PASSWORD [=] 'secret'   |   IDENTIFIED BY secret
        let secret_at = if word(k, "password") {
            Some(if punct(k + 1, "=") { k + 2 } else { k + 1 })
        } else if word(k, "identified") && word(k + 1, "by") {
            Some(k + 2)
        } else {
            None
        };
        if let Some(j) = secret_at {
            match toks.get(j) {
                Some(&(Tok::Literal, a, b)) => cuts.push((a, b, format!("'{MASK}'"))),
                Some(&(Tok::Quoted, a, b)) => {
                    let q = &statement[a..a + 1];
                    let close = if q == "[" { "]" } else { q };
                    cuts.push((a, b, format!("{q}{MASK}{close}")));
                }
                // A bare word only after IDENTIFIED BY (after PASSWORD it is a column's type).
                Some(&(Tok::Word, a, b)) if word(k, "identified") => cuts.push((a, b, MASK.to_string())),
                _ => {}
            }
        }
        // DBLINK('host:port:db:user:password:props', ...)
        if word(k, "dblink") && punct(k + 1, "(") {
            if let Some(&(Tok::Literal, a, b)) = toks.get(k + 2) {
                if let Some(masked) = mask_dblink(&statement[a..b]) {
                    cuts.push((a, b, masked));
                }
            }
        }
    }
    if cuts.is_empty() {
        return std::borrow::Cow::Borrowed(statement);
    }
    let mut out = String::with_capacity(statement.len());
    let mut at = 0;
    for (a, b, with) in cuts {
        out.push_str(&statement[at..a]);
        out.push_str(&with);
        at = b;
    }
    out.push_str(&statement[at..]);
    std::borrow::Cow::Owned(out)
}

/// `'host:port:db:user:password:...'` with the password field masked.
fn mask_dblink(literal: &str) -> Option<String> {
    let inner = literal.strip_prefix('\'')?.strip_suffix('\'')?;
    let fields: Vec<&str> = inner.splitn(6, ':').collect();
    if fields.len() < 5 || fields[4].is_empty() {
        return None;
    }
    let mut masked: Vec<&str> = fields.clone();
    masked[4] = MASK;
    Some(format!("'{}'", masked.join(":")))
}

#[cfg(test)]
mod tests {
    use super::redact_secrets as r;

    #[test]
    fn user_passwords() {
        assert_eq!(r("CREATE USER breadth_user PASSWORD 'bu_pw'"), "CREATE USER breadth_user PASSWORD '***'");
        assert_eq!(r("alter user u password 'it''s'"), "alter user u password '***'");
        assert_eq!(r("CREATE USER u PASSWORD 'a' GROUPS g"), "CREATE USER u PASSWORD '***' GROUPS g");
        assert_eq!(r("CREATE USER u IDENTIFIED BY secret"), "CREATE USER u IDENTIFIED BY ***");
        assert_eq!(r("create user u identified by \"s3\""), "create user u identified by \"***\"");
    }

    #[test]
    fn server_and_dblink_credentials() {
        assert_eq!(
            r("CREATE SERVER srv (HOST='h', PORT=33000, DBNAME=db, USER=u, PASSWORD='pw', PROPERTIES='x')"),
            "CREATE SERVER srv (HOST='h', PORT=33000, DBNAME=db, USER=u, PASSWORD='***', PROPERTIES='x')"
        );
        assert_eq!(
            r("CREATE VIEW v AS SELECT * FROM DBLINK('10.0.0.1:33000:demodb:dba:pw:', 'SELECT 1') AS t(a INT)"),
            "CREATE VIEW v AS SELECT * FROM DBLINK('10.0.0.1:33000:demodb:dba:***:', 'SELECT 1') AS t(a INT)"
        );
    }

    #[test]
    fn leaves_everything_else_alone() {
        for s in [
            "CREATE TABLE users (id INT, password VARCHAR(100))",
            "INSERT INTO t VALUES ('password ''x''')",
            "CREATE TABLE t (a INT) -- password 'x'",
            "CREATE TABLE \"password\" (a INT)",
            "ALTER USER u PASSWORD",
            "",
        ] {
            assert_eq!(r(s), s);
            assert!(matches!(r(s), std::borrow::Cow::Borrowed(_)));
        }
    }

    #[test]
    fn unterminated_input_is_safe() {
        assert_eq!(r("CREATE USER u PASSWORD 'abc"), "CREATE USER u PASSWORD '***'");
        let _ = r("/* unterminated");
        let _ = r("DBLINK('a:b");
        let _ = r("[");
    }
}
