//! The seed's limit table, and how a string over its limit is cut and cleaned.
//!
//! Collie cuts or refuses whatever goes past these limits, so the app stays
//! within them itself and loses nothing: a string over its limit is cut (at a
//! character boundary) and its control and invisible characters are removed; a
//! list keeps its first entries.

/// A request body, in bytes (413 `too-large` past it).
pub const BODY: usize = 64 * 1024;
/// Workspaces, tabs and panes per snapshot.
pub const WORKSPACES: usize = 64;
/// Tabs per snapshot.
pub const TABS: usize = 256;
/// Panes per snapshot.
pub const PANES: usize = 256;
/// Open asks shown per pane, oldest first.
pub const OPEN_ASKS: usize = 50;
/// Options of a permission.
pub const PERMISSION_OPTIONS: usize = 6;
/// Options of a choice, and of a choice field.
pub const CHOICE_OPTIONS: usize = 8;
/// Fields of a form.
pub const FORM_FIELDS: usize = 6;
/// Starters per snapshot.
pub const STARTERS: usize = 50;
/// Belt buttons per pane.
pub const BELT_BUTTONS: usize = 4;
/// A belt button's label, in characters.
pub const BELT_LABEL_CHARS: usize = 16;
/// An id, in bytes.
pub const ID: usize = 128;
/// The host name hello gives, in bytes.
pub const HOST_NAME: usize = 64;
/// Text of a user, reply, thinking or notice item, in bytes.
pub const TEXT_ITEM: usize = 64 * 1024;
/// Text of a markdown or code item, in bytes.
pub const CODE_ITEM: usize = 32 * 1024;
/// Text the phone sends, in bytes.
pub const SENT_TEXT: usize = 32 * 1024;
/// A link, in characters (`https://` only).
pub const LINK_CHARS: usize = 2048;
/// Conversations per history page.
pub const CONVERSATIONS_PAGE: usize = 100;
/// Items per history page.
pub const ITEMS_PAGE: usize = 1000;
/// A history cursor, in bytes of printable ASCII without spaces.
pub const CURSOR: usize = 512;
/// Events per events answer.
pub const EVENTS: usize = 1000;
/// Items in the whole view a reader that fell behind gets.
pub const VIEW_ITEMS: usize = 2000;
/// A title (workspace, tab, ask), in bytes; the seed sets none, so the app
/// keeps titles to a line a phone can show.
pub const TITLE: usize = 256;

/// Response limits: what Collie reads at most, per route.
pub mod response {
    /// hello.
    pub const HELLO: usize = 16 * 1024;
    /// snapshot.
    pub const SNAPSHOT: usize = 4 * 1024 * 1024;
    /// events.
    pub const EVENTS: usize = 8 * 1024 * 1024;
    /// conversations.
    pub const CONVERSATIONS: usize = 1024 * 1024;
    /// items.
    pub const ITEMS: usize = 8 * 1024 * 1024;
    /// Any POST.
    pub const POST: usize = 16 * 1024;
}

/// A string after cleaning and cutting, and whether either changed it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Cleaned {
    /// The text that may go on the wire.
    pub text: String,
    /// Something was removed or cut.
    pub changed: bool,
}

/// Whether a character is one the wire never carries: control characters
/// (but newline and tab) and the invisible ones that can hide or reorder text.
pub fn is_unwanted(c: char) -> bool {
    (c.is_control() && c != '\n' && c != '\t')
        || matches!(
            c,
            '\u{200b}'..='\u{200f}'
                | '\u{202a}'..='\u{202e}'
                | '\u{2060}'..='\u{2064}'
                | '\u{2066}'..='\u{2069}'
                | '\u{feff}'
                | '\u{00ad}'
        )
}

/// Removes unwanted characters and cuts to at most `max_bytes` bytes.
pub fn clean(text: &str, max_bytes: usize) -> Cleaned {
    let mut out = String::with_capacity(text.len().min(max_bytes));
    let mut changed = false;
    for c in text.chars() {
        if is_unwanted(c) {
            changed = true;
            continue;
        }
        if out.len() + c.len_utf8() > max_bytes {
            changed = true;
            break;
        }
        out.push(c);
    }
    Cleaned { text: out, changed }
}

/// [`clean`], counting characters instead of bytes.
pub fn clean_chars(text: &str, max_chars: usize) -> Cleaned {
    let mut out = String::new();
    let mut changed = false;
    let mut count = 0;
    for c in text.chars() {
        if is_unwanted(c) {
            changed = true;
            continue;
        }
        if count == max_chars {
            changed = true;
            break;
        }
        out.push(c);
        count += 1;
    }
    Cleaned { text: out, changed }
}

/// Cleans and cuts; the text only.
pub fn cut(text: &str, max_bytes: usize) -> String {
    clean(text, max_bytes).text
}

/// An id: 1–128 bytes, no control characters, spaces, `/`, `?` or `#`.
pub fn valid_id(id: &str) -> bool {
    !id.is_empty()
        && id.len() <= ID
        && !id
            .chars()
            .any(|c| c.is_control() || c.is_whitespace() || matches!(c, '/' | '?' | '#'))
}

/// A history cursor: 1–512 bytes of printable ASCII without spaces.
pub fn valid_cursor(cursor: &str) -> bool {
    !cursor.is_empty()
        && cursor.len() <= CURSOR
        && cursor.bytes().all(|b| (0x21..=0x7e).contains(&b))
}

/// A link the wire may carry: `https://`, at most 2048 characters, nothing unwanted.
pub fn valid_link(url: &str) -> bool {
    url.starts_with("https://")
        && url.chars().count() <= LINK_CHARS
        && !url.chars().any(|c| is_unwanted(c) || c.is_whitespace())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cleaning_removes_controls_and_invisibles_and_cuts_at_a_boundary() {
        let c = clean("a\u{1b}[31mb\u{202e}c\u{0}d\ne\tf", 100);
        assert_eq!(c.text, "a[31mbcd\ne\tf");
        assert!(c.changed);
        let c = clean("ééé", 5);
        assert_eq!(c.text, "éé");
        assert!(c.changed);
        assert_eq!(
            clean("plain", 5),
            Cleaned {
                text: "plain".into(),
                changed: false
            }
        );
        assert_eq!(
            clean_chars("abcdefghijklmnopqrs", 16).text,
            "abcdefghijklmnop"
        );
    }

    #[test]
    fn ids_cursors_and_links() {
        assert!(valid_id("p12"));
        for bad in ["", "a b", "a/b", "a?b", "a#b", "a\u{7}", &"x".repeat(129)] {
            assert!(!valid_id(bad), "{bad:?}");
        }
        assert!(valid_cursor("v1.12"));
        assert!(!valid_cursor("a b"));
        assert!(!valid_cursor(&"x".repeat(513)));
        assert!(valid_link("https://example.com/x"));
        assert!(!valid_link("http://example.com"));
        assert!(!valid_link("javascript:alert(1)"));
    }
}
