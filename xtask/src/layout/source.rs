//! Rust source read as text, for the layout checks: comments and literals blanked, brackets
//! matched, identifiers and paths picked out. Small and hand-written on purpose (no `syn`):
//! xtask must build in seconds.

/// Whether `c` can be part of an identifier.
pub(super) fn is_ident_char(c: char) -> bool {
    c.is_alphanumeric() || c == '_'
}

/// Blanks comments and the contents of string and char literals (keeping newlines and
/// positions), so that what remains is code. Lifetimes (`'a`) are told from chars (`'a'`) by
/// the closing quote.
pub(super) fn strip(text: &str) -> Vec<char> {
    let src: Vec<char> = text.chars().collect();
    let mut out = src.clone();
    let blank = |out: &mut Vec<char>, from: usize, to: usize| {
        for c in &mut out[from..to.min(src.len())] {
            if *c != '\n' {
                *c = ' ';
            }
        }
    };
    let at = |i: usize| src.get(i).copied().unwrap_or('\0');
    let mut i = 0;
    while i < src.len() {
        let c = src[i];
        let prev_ident = i > 0 && is_ident_char(src[i - 1]);
        if c == '/' && at(i + 1) == '/' {
            let end = (i..src.len())
                .find(|&j| src[j] == '\n')
                .unwrap_or(src.len());
            blank(&mut out, i, end);
            i = end;
        } else if c == '/' && at(i + 1) == '*' {
            let (mut depth, mut j) = (1, i + 2);
            while j < src.len() && depth > 0 {
                if src[j] == '/' && at(j + 1) == '*' {
                    depth += 1;
                    j += 2;
                } else if src[j] == '*' && at(j + 1) == '/' {
                    depth -= 1;
                    j += 2;
                } else {
                    j += 1;
                }
            }
            blank(&mut out, i, j);
            i = j;
        } else if (c == 'r' || (c == 'b' && at(i + 1) == 'r')) && !prev_ident && {
            let k = if c == 'b' { i + 2 } else { i + 1 };
            let hashes = (k..src.len()).take_while(|&j| src[j] == '#').count();
            at(k + hashes) == '"'
        } {
            // Raw string: ends at a quote followed by as many hashes as it opened with.
            let k = if c == 'b' { i + 2 } else { i + 1 };
            let hashes = (k..src.len()).take_while(|&j| src[j] == '#').count();
            let open = k + hashes + 1;
            let mut j = open;
            while j < src.len() && !(src[j] == '"' && (1..=hashes).all(|h| at(j + h) == '#')) {
                j += 1;
            }
            blank(&mut out, open, j);
            i = j + 1 + hashes;
        } else if c == '"' {
            let mut j = i + 1;
            while j < src.len() && src[j] != '"' {
                j += if src[j] == '\\' { 2 } else { 1 };
            }
            blank(&mut out, i + 1, j);
            i = j + 1;
        } else if c == '\'' && !prev_ident {
            if at(i + 1) == '\\' {
                let mut j = i + 2;
                while j < src.len() && src[j] != '\'' && src[j] != '\n' {
                    j += 1;
                }
                blank(&mut out, i + 1, j);
                i = j + 1;
            } else if at(i + 2) == '\'' {
                blank(&mut out, i + 1, i + 2);
                i += 3;
            } else {
                i += 1; // a lifetime or label
            }
        } else {
            i += 1;
        }
    }
    out
}

/// The index of the bracket closing the one at `open` (or the end of the text).
pub(super) fn matching_close(code: &[char], open: usize) -> usize {
    let mut depth = 0usize;
    for (j, &c) in code.iter().enumerate().skip(open) {
        match c {
            '{' | '(' | '[' => depth += 1,
            '}' | ')' | ']' => {
                depth = depth.saturating_sub(1);
                if depth == 0 {
                    return j;
                }
            }
            _ => {}
        }
    }
    code.len()
}

/// Every position where `needle` starts in `code`.
pub(super) fn find_all(code: &[char], needle: &str) -> Vec<usize> {
    let needle: Vec<char> = needle.chars().collect();
    (0..code.len().saturating_sub(needle.len() - 1))
        .filter(|&i| code[i..i + needle.len()] == needle[..])
        .collect()
}

/// The identifier starting at `i`, if any.
pub(super) fn ident_at(code: &[char], i: usize) -> Option<String> {
    let word: String = code[i.min(code.len())..]
        .iter()
        .take_while(|c| is_ident_char(**c))
        .collect();
    (!word.is_empty() && !word.starts_with(|c: char| c.is_ascii_digit())).then_some(word)
}

/// The first non-whitespace position at or after `i`.
pub(super) fn skip_ws(code: &[char], mut i: usize) -> usize {
    while i < code.len() && code[i].is_whitespace() {
        i += 1;
    }
    i
}
