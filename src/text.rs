//! Text that came from outside the program (manifest values, file names, YAML error excerpts,
//! the service's messages) made safe to print: nothing in it can end a line, move the cursor,
//! clear the screen, or hide or reorder text on a terminal, and its length is capped. The one
//! function is [`printable`]; the API client's scrub of the service's texts (`api::error::scrub`)
//! is it plus the removal of the client's own credential.

/// Most characters of one value printed inside a message: a name, a path, a field's value.
pub const MAX_VALUE_CHARS: usize = 300;
/// Most characters of one printed line or message, which may embed several values.
pub const MAX_LINE_CHARS: usize = 2000;

/// `text` cut to at most `max_chars` characters (`max_chars` ≥ 1), the last one `…` when it
/// was cut; unchanged when it fits. Nothing is escaped (see [`printable`] for text shown on a
/// terminal).
pub fn cut(text: &str, max_chars: usize) -> String {
    match text.char_indices().nth(max_chars) {
        None => text.to_owned(),
        Some(_) => {
            let kept = text
                .char_indices()
                .nth(max_chars.saturating_sub(1))
                .map_or(text.len(), |(at, _)| at);
            format!("{}…", &text[..kept])
        }
    }
}

/// `text` made safe to print: every character that could end a line, move the cursor or hide
/// text is escaped (newline as `\n`, carriage return as `\r`, tab as `\t`; any other C0 or C1
/// control character, DEL, bidirectional override or isolate, zero-width character, line or
/// paragraph separator in JSON's form `\uXXXX`, e.g. ESC as `\u001b`, as schema messages and
/// `-o json` write them; every such character is below U+10000); the result is cut after
/// `max_chars` characters (escapes counted as written) and ends with `…` when cut.
///
/// Backslashes are kept as they are, so applying it twice changes nothing more.
pub fn printable(text: &str, max_chars: usize) -> String {
    let mut out = String::with_capacity(text.len().min(max_chars));
    let mut written = 0;
    for c in text.chars() {
        let escaped = escape(c);
        let chars = match &escaped {
            Escaped::Kept(_) => 1,
            Escaped::Written(s) => s.len(),
        };
        if written + chars > max_chars {
            out.push('…');
            return out;
        }
        written += chars;
        match escaped {
            Escaped::Kept(c) => out.push(c),
            Escaped::Written(s) => out.push_str(&s),
        }
    }
    out
}

/// A JSON document (as `serde_json` writes it) made safe to print, its values unchanged: every
/// character [`printable`] escapes that `serde_json` leaves raw inside strings (C1 controls,
/// DEL, bidirectional and zero-width characters) is written as a JSON `\uXXXX` escape.
/// `serde_json` already escapes C0 controls, and such characters cannot occur outside strings.
pub fn printable_json(json: &str) -> String {
    let mut out = String::with_capacity(json.len());
    for c in json.chars() {
        if c != '\n' && needs_escape(c) {
            out.push_str(&format!("\\u{:04x}", u32::from(c)));
        } else {
            out.push(c);
        }
    }
    out
}

/// `text` as a JSON string, made safe to print ([`printable_json`]): in double quotes, a
/// control or invisible character as `\uXXXX`, a quote or backslash escaped. Not capped.
pub fn quoted(text: &str) -> String {
    printable_json(&serde_json::to_string(text).unwrap_or_default())
}

fn needs_escape(c: char) -> bool {
    c.is_control() || is_invisible(c)
}

enum Escaped {
    Kept(char),
    Written(String),
}

fn escape(c: char) -> Escaped {
    match c {
        '\n' => Escaped::Written("\\n".into()),
        '\r' => Escaped::Written("\\r".into()),
        '\t' => Escaped::Written("\\t".into()),
        c if needs_escape(c) => Escaped::Written(format!("\\u{:04x}", u32::from(c))),
        c => Escaped::Kept(c),
    }
}

/// Characters that are not control characters but can reorder, hide or break terminal text:
/// bidirectional marks, overrides and isolates, zero-width characters, the byte order mark, and
/// the line and paragraph separators.
fn is_invisible(c: char) -> bool {
    matches!(
        c,
        '\u{061C}'
            | '\u{200B}'..='\u{200F}'
            | '\u{2028}'..='\u{202E}'
            | '\u{2060}'..='\u{2069}'
            | '\u{FEFF}'
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Line ends, escape sequences, C1 controls and bidi overrides are escaped, in JSON's
    /// `\uXXXX` form as in schema messages and JSON output; the rest stays.
    #[test]
    fn escapes_what_could_forge_output() {
        assert_eq!(
            printable("a\u{1b}[2K\rb\nc\td", 100),
            "a\\u001b[2K\\rb\\nc\\td"
        );
        assert_eq!(
            printable("x\u{202E}y\u{9b}z\u{7f}", 100),
            "x\\u202ey\\u009bz\\u007f"
        );
        assert_eq!(printable("Team ü – ok \\n", 100), "Team ü – ok \\n");
    }

    /// JSON keeps its values: the escapes are JSON's own.
    #[test]
    fn json_escapes_keep_values() {
        let value = serde_json::json!({"name": "a\u{9b}2J\u{1b}[0m\u{202e}b\nc"});
        let json = printable_json(&serde_json::to_string_pretty(&value).unwrap());
        assert!(
            !json.chars().any(|c| c != '\n' && needs_escape(c)),
            "{json}"
        );
        assert!(
            json.contains("\\u009b") && json.contains("\\u202e"),
            "{json}"
        );
        assert_eq!(
            serde_json::from_str::<serde_json::Value>(&json).unwrap(),
            value
        );
    }

    /// Applying it twice changes nothing more.
    #[test]
    fn idempotent() {
        let once = printable("ci\r\u{1b}[2J\u{2028}", 100);
        assert_eq!(printable(&once, 100), once);
    }

    /// The cap counts characters as written and never splits an escape.
    #[test]
    fn caps_length() {
        assert_eq!(printable("abcdef", 4), "abcd…");
        assert_eq!(printable("ab\u{1b}", 6), "ab…");
        assert_eq!(printable("ab\u{1b}", 8), "ab\\u001b");
        assert_eq!(printable(&"é".repeat(10), 10), "é".repeat(10));
    }
}
