//! A reader's keywords, all matched in one pass over a status's text (R-MAPI-6).
//!
//! Mastodon's rule: a keyword matches case-insensitively; a whole-word keyword must not run on
//! into a word character where it begins or ends with one (so `#tag` or `:)` still match inside
//! text). Matching each keyword on its own cost a page of 100 filters × 100 keywords of 512
//! characters 17-23 s of CPU on an async worker (issue 61, F4): the work grew with the number
//! of keywords times the length of the text.
//!
//! Here every keyword is one pattern of a single Aho-Corasick automaton, and whole words need
//! no check per match: the text is searched with an [`EDGE`] byte at every word boundary (and
//! at either end next to a word character), and a whole-word keyword carries the same bytes at
//! its ends, so an occurrence of its pattern *is* a whole-word occurrence. Interior boundaries
//! are marked alike in text and keyword, so a keyword of several words matches as it reads.
//! Which patterns occur is then read off the automaton's states: a state's matches depend on
//! the state alone, so each state's are collected once per text, however often it is entered.
//! A scan costs one transition per byte plus each distinct state's matches once; with the
//! account's keywords bounded in total ([`super::MAX_KEYWORD_BYTES`]) that stays small — see
//! the tests for the worst sets we know of.

use std::collections::{HashMap, HashSet};

use aho_corasick::automaton::Automaton;
use aho_corasick::nfa::contiguous::NFA;
use aho_corasick::{Anchored, MatchKind};

/// Marks a word boundary in a searched text and in a pattern: 0xFF is never a byte of UTF-8,
/// so it can only match the marks themselves.
const EDGE: u8 = 0xFF;

/// Mastodon's `[[:word:]]`, as the filters have always read it.
fn is_word(c: char) -> bool {
    c.is_alphanumeric() || c == '_'
}

/// `text` lowercased, with [`EDGE`] between a word character and one that is not, and at
/// either end next to a word character (where a regular expression's `\b` matches).
fn marked(text: &str) -> Vec<u8> {
    let lower = text.to_lowercase();
    let mut out = Vec::with_capacity(lower.len() + lower.len() / 4 + 2);
    let mut in_word = false;
    // Copied a run at a time: texts are long and boundaries comparatively rare.
    let mut run = 0;
    for (at, c) in lower.char_indices() {
        let word = if c.is_ascii() {
            c.is_ascii_alphanumeric() || c == '_'
        } else {
            is_word(c)
        };
        if word != in_word {
            out.extend_from_slice(&lower.as_bytes()[run..at]);
            out.push(EDGE);
            run = at;
            in_word = word;
        }
    }
    out.extend_from_slice(&lower.as_bytes()[run..]);
    if in_word {
        out.push(EDGE);
    }
    out
}

/// The pattern of `keyword`: marked as texts are, keeping its end marks only for a whole word
/// (a part-word keyword may begin or end inside a word of the text).
fn pattern(keyword: &str, whole_word: bool) -> Vec<u8> {
    let mut p = marked(keyword);
    if !whole_word {
        if p.last() == Some(&EDGE) {
            p.pop();
        }
        if p.first() == Some(&EDGE) {
            p.remove(0);
        }
    }
    p
}

/// Keywords ready to match; built once per reader (request or stream).
#[derive(Debug, Default)]
pub struct KeywordSet {
    /// `None` without a keyword.
    automaton: Option<NFA>,
    /// Each keyword's pattern, by the keyword's position in the list built from; equal
    /// patterns ("Cat" and "cat") are one.
    pattern_of: Vec<usize>,
    patterns: usize,
}

/// What one scan found.
#[derive(Debug)]
pub struct Found {
    /// By keyword position, as [`KeywordSet::new`] was given them.
    pub keywords: Vec<bool>,
    /// Transitions taken plus matches read: the scan's cost, which tests bound.
    pub work: usize,
}

impl KeywordSet {
    /// The set of `keywords` (text, whole word), in that order.
    pub fn new<'a>(keywords: impl IntoIterator<Item = (&'a str, bool)>) -> KeywordSet {
        let mut ids: HashMap<Vec<u8>, usize> = HashMap::new();
        let mut patterns: Vec<Vec<u8>> = Vec::new();
        let mut pattern_of = Vec::new();
        for (keyword, whole_word) in keywords {
            let p = pattern(keyword, whole_word);
            // A blank keyword is refused when stored; one would match everywhere, so it gets
            // a pattern id no scan reports.
            if p.is_empty() {
                pattern_of.push(usize::MAX);
                continue;
            }
            let id = *ids.entry(p).or_insert_with_key(|p| {
                patterns.push(p.clone());
                patterns.len() - 1
            });
            pattern_of.push(id);
        }
        let automaton = if patterns.is_empty() {
            None
        } else {
            NFA::builder()
                .match_kind(MatchKind::Standard)
                .prefilter(false)
                .build(&patterns)
                .inspect_err(|err| {
                    // Only past the automaton's own limits, far above the stored bounds.
                    tracing::warn!(error = %err, "a reader's keywords could not be compiled");
                })
                .ok()
        };
        KeywordSet {
            automaton,
            pattern_of,
            patterns: patterns.len(),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.automaton.is_none()
    }

    /// Which keywords occur in `text`, in one pass.
    pub fn scan(&self, text: &str) -> Found {
        let mut found = Found {
            keywords: vec![false; self.pattern_of.len()],
            work: 0,
        };
        let Some(nfa) = &self.automaton else {
            return found;
        };
        let Ok(mut state) = nfa.start_state(Anchored::No) else {
            return found;
        };
        let mut hit = vec![false; self.patterns];
        let mut left = self.patterns;
        let mut seen = Seen::new(nfa.memory_usage());
        for byte in marked(text) {
            state = nfa.next_state(Anchored::No, state, byte);
            found.work += 1;
            if !nfa.is_special(state) || !nfa.is_match(state) || !seen.first(state.as_usize()) {
                continue;
            }
            for i in 0..nfa.match_len(state) {
                found.work += 1;
                let p = nfa.match_pattern(state, i).as_usize();
                if let Some(h) = hit.get_mut(p)
                    && !*h
                {
                    *h = true;
                    left -= 1;
                }
            }
            if left == 0 {
                break;
            }
        }
        for (k, p) in self.pattern_of.iter().enumerate() {
            found.keywords[k] = hit.get(*p).copied().unwrap_or(false);
        }
        found
    }
}

/// The match states a scan has read. A state's id is below the automaton's size in 4-byte
/// words (the contiguous NFA's ids are offsets into it), so a bitset of that many bits holds
/// them; an id past it, were the representation to change, goes to a hash set instead. A set
/// hashed per byte cost ~50 ns per byte of a text that is all matches.
struct Seen {
    bits: Vec<u64>,
    beyond: HashSet<usize>,
}

impl Seen {
    fn new(automaton_bytes: usize) -> Seen {
        Seen {
            bits: vec![0; automaton_bytes / 4 / 64 + 1],
            beyond: HashSet::new(),
        }
    }

    /// Whether `state` is read for the first time (and from now on, it has been).
    fn first(&mut self, state: usize) -> bool {
        match self.bits.get_mut(state / 64) {
            Some(word) => {
                let bit = 1u64 << (state % 64);
                let first = *word & bit == 0;
                *word |= bit;
                first
            }
            None => self.beyond.insert(state),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hit(keyword: &str, whole_word: bool, text: &str) -> bool {
        KeywordSet::new([(keyword, whole_word)]).scan(text).keywords[0]
    }

    #[test]
    fn whole_words_do_not_match_inside_words() {
        assert!(hit("cat", true, "a Cat sat"));
        assert!(hit("Cat", true, "cat."));
        assert!(!hit("cat", true, "concatenate"));
        assert!(!hit("cat", true, "cats"));
        assert!(
            hit("cat", true, "cats and a cat"),
            "a later occurrence counts"
        );
        assert!(hit("cat", false, "concatenate"));
        assert!(hit("two words", true, "said two  words? no: two words!"));
        assert!(!hit("two words", true, "two wordsmiths"));
        assert!(
            hit("a cat", false, "banana cats"),
            "part words at both ends"
        );
        assert!(
            !hit("a cat", false, "a  cat"),
            "the spaces are the keyword's"
        );
    }

    #[test]
    fn keywords_are_literal_and_edges_follow_the_keyword() {
        assert!(
            hit("#rust", true, "I like #Rust!"),
            "no boundary before a non-word start"
        );
        assert!(!hit("#rust", true, "#rustacean"));
        assert!(
            hit("a.b", false, "xa.by") && !hit("a.b", false, "axb"),
            "literal, not a pattern"
        );
        assert!(
            hit("über", true, "ÜBER alles") && !hit("über", true, "überall"),
            "Unicode words"
        );
        assert!(hit(":)", true, "fine:)"), "no word edge to check");
        assert!(!hit("", false, "anything"));
        assert!(hit("οδος", true, "ΟΔΟΣ"), "final sigma lowercases alike");
        let with_blank = KeywordSet::new([("", false), ("cat", false)]);
        assert_eq!(with_blank.scan("a cat").keywords, [false, true]);
    }

    #[test]
    fn every_keyword_of_a_set_is_told_apart() {
        let set = KeywordSet::new([
            ("cat", true),
            ("Cat", false),
            ("cats", true),
            ("dog", true),
            ("at", false),
            ("at", true),
        ]);
        let found = set.scan("Two cats and a hot dog.");
        assert_eq!(found.keywords, [false, true, true, true, true, false]);
        assert!(KeywordSet::new([]).is_empty());
        assert_eq!(
            KeywordSet::new([]).scan("anything").keywords,
            [] as [bool; 0]
        );
    }

    /// F4: the audit's set — keywords of 512 characters that nearly match the text everywhere
    /// — is matched in one pass: the work is the text's length plus a little, not the number
    /// of keywords times it (the old per-keyword search's ~5 000 × 40 000 here).
    #[test]
    fn one_pass_over_the_text_whatever_the_keywords() {
        let keywords: Vec<String> = (0..5_000)
            .map(|i| format!("{}{i:04}", "a".repeat(508)))
            .collect();
        let text = "a".repeat(40_000);
        for whole_word in [true, false] {
            let set = KeywordSet::new(keywords.iter().map(|k| (k.as_str(), whole_word)));
            let found = set.scan(&text);
            assert!(found.keywords.iter().all(|k| !k));
            assert!(
                found.work <= text.len() + 2 + 512,
                "{} steps over {} bytes",
                found.work,
                text.len()
            );
        }
    }

    /// The most matches we know how to force per byte under the byte bound: a chain of
    /// keywords each the suffix of the next (a, aa, aaa, …) and long keywords ending in the
    /// chain, so that many states each report the whole chain. Each state's matches are read
    /// once per text, so the work stays within the bound's square root per byte.
    #[test]
    fn nested_keywords_are_read_once_per_state() {
        let budget = crate::filters::MAX_KEYWORD_BYTES;
        let chain = 100;
        // One keyword never found, so the scan cannot stop early.
        let mut keywords: Vec<String> = vec!["zzzz".into()];
        keywords.extend((1..=chain).map(|n| "a".repeat(n)));
        let mut used: usize = keywords.iter().map(String::len).sum();
        let mut i = 0;
        while used + chain + 4 <= budget {
            let k = format!("{i:04}{}", "a".repeat(chain));
            used += k.len();
            keywords.push(k);
            i += 1;
        }
        let text: String = (0..i)
            .map(|i| format!("{i:04}{} ", "a".repeat(chain)))
            .collect();
        let set = KeywordSet::new(keywords.iter().map(|k| (k.as_str(), false)));
        let found = set.scan(&text);
        assert!(found.keywords[1..].iter().all(|k| *k) && !found.keywords[0]);
        let per_byte = found.work as f64 / text.len() as f64;
        assert!(
            per_byte < (2.0 * budget as f64).sqrt(),
            "{} steps over {} bytes",
            found.work,
            text.len()
        );
        // The same text read once per keyword's occurrence would be the chain's length per
        // byte; the memo reads each state's list at most once however often it is entered.
        let once = set.scan(&text.repeat(2)).work;
        assert!(once < found.work + 2 * text.len() + 16);
    }
}
