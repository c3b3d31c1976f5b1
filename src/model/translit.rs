//! Latin letters with accents and a few ligatures as plain ASCII, for ids made from titles
//! ("Überprüfung" → "uberprufung"). A table of Latin-1 and Latin Extended-A, not a general
//! transliterator: other scripts give no letters and the id falls back to the random part.
//! Pure.

/// Returns `c` in ASCII: itself when it is ASCII, its base letter(s) when it is a Latin letter
/// with a mark or a ligature, None otherwise.
pub fn ascii_of(c: char) -> Option<&'static str> {
    if c.is_ascii() {
        return None;
    }
    TABLE
        .iter()
        .find(|(chars, _)| chars.contains(c))
        .map(|(_, ascii)| *ascii)
}

/// Returns `text` with each Latin letter written in ASCII; other characters are kept.
pub fn to_ascii(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match ascii_of(c) {
            Some(a) => out.push_str(a),
            None => out.push(c),
        }
    }
    out
}

/// Groups of letters and what each is written as.
const TABLE: &[(&str, &str)] = &[
    ("ÀÁÂÃÄÅĀĂĄ", "A"),
    ("àáâãäåāăą", "a"),
    ("ÆǼ", "AE"),
    ("æǽ", "ae"),
    ("ÇĆĈĊČ", "C"),
    ("çćĉċč", "c"),
    ("ÐĎĐ", "D"),
    ("ðďđ", "d"),
    ("ÈÉÊËĒĔĖĘĚ", "E"),
    ("èéêëēĕėęě", "e"),
    ("ĜĞĠĢ", "G"),
    ("ĝğġģ", "g"),
    ("ĤĦ", "H"),
    ("ĥħ", "h"),
    ("ÌÍÎÏĨĪĬĮİ", "I"),
    ("ìíîïĩīĭįı", "i"),
    ("Ĳ", "IJ"),
    ("ĳ", "ij"),
    ("Ĵ", "J"),
    ("ĵ", "j"),
    ("Ķ", "K"),
    ("ķĸ", "k"),
    ("ĹĻĽĿŁ", "L"),
    ("ĺļľŀł", "l"),
    ("ÑŃŅŇŊ", "N"),
    ("ñńņňŉŋ", "n"),
    ("ÒÓÔÕÖØŌŎŐ", "O"),
    ("òóôõöøōŏő", "o"),
    ("Œ", "OE"),
    ("œ", "oe"),
    ("ŔŖŘ", "R"),
    ("ŕŗř", "r"),
    ("ŚŜŞŠ", "S"),
    ("śŝşšſ", "s"),
    ("ß", "ss"),
    ("ŢŤŦ", "T"),
    ("ţťŧ", "t"),
    ("Þ", "TH"),
    ("þ", "th"),
    ("ÙÚÛÜŨŪŬŮŰŲ", "U"),
    ("ùúûüũūŭůűų", "u"),
    ("Ŵ", "W"),
    ("ŵ", "w"),
    ("ÝŶŸ", "Y"),
    ("ýÿŷ", "y"),
    ("ŹŻŽ", "Z"),
    ("źżž", "z"),
];

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn latin_letters_keep_their_base_letter() {
        assert_eq!(
            to_ascii("Überprüfung der Straße"),
            "Uberprufung der Strasse"
        );
        assert_eq!(to_ascii("Łódź, Ærø, façade"), "Lodz, AEro, facade");
        assert_eq!(to_ascii("日本 ok"), "日本 ok");
    }
}
