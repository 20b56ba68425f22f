//! The writing system of a name: what `vault measure` records of notes' names (how many are
//! in each script) and what a twin draws its titles' words from.
//!
//! A name's script is that of most of its non-ASCII letters, so `Café crème` is `latin`,
//! `東京 notes` is `han` and `Meeting notes` is `ascii`; a name whose only non-ASCII
//! characters are not letters (an en dash, a curly quote, an emoji) is `punct`. Every word
//! list is in NFC, lower case where the script has case, and holds no combining mark in
//! U+0300..U+036F, no emoji and no `.`, so a generated title falls in no hazard class.

use std::collections::BTreeMap;

/// The scripts a name is sorted into, in the order the shape file lists them.
pub const SCRIPTS: &[&str] = &[
    "ascii",
    "punct",
    "latin",
    "cyrillic",
    "greek",
    "han",
    "kana",
    "hangul",
    "arabic",
    "hebrew",
    "indic",
    "southeast_asian",
    "other",
];

/// The script of one non-ASCII letter.
fn letter_script(c: char) -> &'static str {
    match u32::from(c) {
        0x00C0..=0x024F | 0x1E00..=0x1EFF => "latin",
        0x0370..=0x03FF | 0x1F00..=0x1FFF => "greek",
        0x0400..=0x052F => "cyrillic",
        0x0590..=0x05FF => "hebrew",
        0x0600..=0x06FF | 0x0750..=0x077F | 0xFB50..=0xFDFF | 0xFE70..=0xFEFF => "arabic",
        0x0900..=0x0DFF => "indic",
        0x0E00..=0x0EFF | 0x1000..=0x109F | 0x1780..=0x17FF => "southeast_asian",
        0x1100..=0x11FF | 0x3130..=0x318F | 0xAC00..=0xD7AF => "hangul",
        0x3040..=0x30FF | 0x31F0..=0x31FF | 0xFF66..=0xFF9F => "kana",
        0x3400..=0x4DBF | 0x4E00..=0x9FFF | 0xF900..=0xFAFF | 0x20000..=0x2FA1F => "han",
        _ => "other",
    }
}

/// The script of `name` (see the module's rule).
pub fn script_of(name: &str) -> &'static str {
    if name.is_ascii() {
        return "ascii";
    }
    let mut counts: BTreeMap<&'static str, u32> = BTreeMap::new();
    for c in name.chars().filter(|c| !c.is_ascii()) {
        // Combining marks (Indic and Thai vowel signs among them) are not letters, but they
        // belong to their base letter's script.
        if c.is_alphabetic() {
            *counts.entry(letter_script(c)).or_default() += 1;
        }
    }
    // The most letters wins; a tie goes to the script listed first.
    let mut best: Option<(&'static str, u32)> = None;
    for s in SCRIPTS {
        if let Some(&k) = counts.get(s)
            && best.is_none_or(|(_, b)| k > b)
        {
            best = Some((s, k));
        }
    }
    best.map_or("punct", |(s, _)| s)
}

/// Words a title in `script` is made of; none for `ascii` and `punct`, whose titles take the
/// generator's English nouns (`text.rs`), `punct` joined by an en dash.
#[rustfmt::skip]
pub(crate) fn words(script: &str) -> &'static [&'static str] {
    match script {
        // Each begins with its non-ASCII letter, so a title cut to one character is still
        // Latin beyond ASCII.
        "latin" => &[
            "über", "élève", "état", "ébauche", "øvelse", "żółw", "ærø", "ångström", "ñandú",
            "çay", "şehir", "ökonomie", "ürün", "ícone", "óleo", "árvore", "ćwiczenie", "łódź",
            "śnieg", "žena", "čas", "šola", "řeka", "ľudia", "ấn", "ước",
        ],
        "cyrillic" => &[
            "привет",
            "заметка",
            "москва",
            "книга",
            "проект",
            "встреча",
            "идея",
            "история",
            "работа",
            "язык",
            "сеть",
            "файл",
            "папка",
            "ссылка",
            "поиск",
            "плагин",
        ],
        "greek" => &[
            "λόγος",
            "θεωρία",
            "σημείωση",
            "βιβλίο",
            "έργο",
            "ιδέα",
            "γλώσσα",
            "σύνδεσμος",
            "αρχείο",
            "φάκελος",
            "αναζήτηση",
        ],
        "han" => &[
            "東京", "日記", "会議", "笔记", "文件", "链接", "插件", "设置", "搜索", "标签", "同步",
            "主题", "编辑", "模板", "图片", "数据",
        ],
        "kana" => &[
            "メモ",
            "ノート",
            "リンク",
            "ファイル",
            "プラグイン",
            "タグ",
            "テンプレート",
            "さがす",
            "はじめに",
            "つかいかた",
        ],
        "hangul" => &[
            "한국어",
            "노트",
            "링크",
            "파일",
            "플러그인",
            "태그",
            "설정",
            "검색",
            "동기화",
            "템플릿",
        ],
        "arabic" => &[
            "ملاحظة",
            "كتاب",
            "مشروع",
            "فكرة",
            "رابط",
            "ملف",
            "بحث",
            "إعدادات",
            "قالب",
        ],
        "hebrew" => &[
            "הערה",
            "ספר",
            "פרויקט",
            "רעיון",
            "קישור",
            "קובץ",
            "חיפוש",
            "תבנית",
        ],
        "indic" => &[
            "नोट",
            "किताब",
            "परियोजना",
            "विचार",
            "लिंक",
            "खोज",
            "বই",
            "নোট",
            "সূচি",
            "খোঁজ",
        ],
        "southeast_asian" => &[
            "บันทึก",
            "หนังสือ",
            "โครงการ",
            "ความคิด",
            "ลิงก์",
            "ค้นหา",
            "ចំណាំ",
            "សៀវភៅ",
            "ស្វែងរក",
        ],
        "other" => &["შენიშვნა", "წიგნი", "ნოტი", "նշում", "գիրք"],
        _ => &[],
    }
}

/// Whether names in `script` separate words with spaces at all (Chinese and Japanese write
/// none, and a `punct` title's words are joined by its en dash), so a measured share of
/// names with spaces is met by the others.
pub(crate) fn spaced(script: &str) -> bool {
    !matches!(script, "han" | "kana" | "punct")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_take_the_script_of_most_of_their_non_ascii_letters() {
        assert_eq!(script_of("Meeting notes"), "ascii");
        assert_eq!(script_of("Café crème"), "latin");
        assert_eq!(script_of("東京 notes"), "han");
        assert_eq!(script_of("Notes – 2024"), "punct");
        assert_eq!(script_of("💡 Idea"), "punct");
        assert_eq!(script_of("Заметка"), "cyrillic");
        assert_eq!(script_of("ファイル"), "kana");
        assert_eq!(script_of("노트"), "hangul");
        assert_eq!(script_of("নোট"), "indic");
        assert_eq!(script_of("ចំណាំ"), "southeast_asian");
        assert_eq!(script_of("შენიშვნა"), "other");
    }

    #[test]
    fn every_word_is_of_its_own_script_and_safe_as_a_name() {
        for s in SCRIPTS {
            for w in words(s) {
                assert_eq!(script_of(w), *s, "{w}");
                assert!(!w.contains(['.', ' ', '/']), "{w}");
                assert!(
                    !w.chars().any(|c| ('\u{300}'..='\u{36f}').contains(&c)),
                    "{w}"
                );
                assert_eq!(w.to_lowercase(), *w, "{w}");
            }
        }
    }
}
