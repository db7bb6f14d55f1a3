//! The colour an account's public pages are drawn in (R-WEB-1): one of the names
//! upstream Hollo offers (Pico CSS's colours), chosen with `theme_color` on
//! `PATCH /api/v1/accounts/update_credentials` and kept in `accounts.theme_color`. A page names
//! it as a class on `<body>` (`theme-<name>`) and `pages.css` holds each colour for light and
//! dark schemes, so the strict CSP (styles only from our stylesheet) needs no inline style.
//! Every light-scheme colour keeps 4.5:1 contrast on white as link text.

use sqlx::PgConnection;
use uuid::Uuid;

/// The colour names, with their accent for light and for dark schemes.
pub const COLORS: [(&str, &str, &str); 20] = [
    ("amber", "#8c5f00", "#f5b700"),
    ("azure", "#0b5fad", "#7eb6ff"),
    ("blue", "#2250d9", "#9ab0ff"),
    ("cyan", "#00727d", "#4dd0dc"),
    ("fuchsia", "#a1239e", "#f38ef0"),
    ("green", "#2e7d32", "#7fd486"),
    ("grey", "#5f6570", "#b4b9c2"),
    ("indigo", "#4a3fcf", "#b0a8ff"),
    ("jade", "#00795b", "#5fd3ae"),
    ("lime", "#557000", "#b8de3e"),
    ("orange", "#b34700", "#ffa366"),
    ("pink", "#b0215f", "#ff93bf"),
    ("pumpkin", "#a34b00", "#ff9d4d"),
    ("purple", "#7b2fbf", "#cf9cff"),
    ("red", "#c0262d", "#ff8f8a"),
    ("sand", "#786a4f", "#d3c4a4"),
    ("slate", "#4f5e73", "#aab8cc"),
    ("violet", "#6a32c9", "#c4a3ff"),
    ("yellow", "#7a6500", "#f2d13d"),
    ("zinc", "#5c5c66", "#bcbcc6"),
];

/// Whether `name` is one of [`COLORS`].
pub fn valid(name: &str) -> bool {
    COLORS.iter().any(|(n, _, _)| *n == name)
}

/// The account's colour, if it chose one.
pub async fn of(conn: &mut PgConnection, account: Uuid) -> Result<Option<String>, sqlx::Error> {
    Ok(
        sqlx::query_scalar("SELECT theme_color FROM accounts WHERE id = $1")
            .bind(account)
            .fetch_optional(conn)
            .await?
            .flatten(),
    )
}

/// The colour a page of `account` is drawn in: none (the default) when it chose none or the
/// database cannot say (a page is not refused for its colour).
pub async fn shown(pool: &sqlx::PgPool, account: Uuid) -> Option<String> {
    let found = match pool.acquire().await {
        Ok(mut conn) => of(&mut conn, account).await,
        Err(e) => Err(e),
    };
    found.unwrap_or_else(|e| {
        tracing::warn!(%account, error = %e, "the page's theme colour could not be read");
        None
    })
}

/// Sets (or, with `None`, clears) the account's colour; its pages' validators move with
/// `updated_at`.
pub async fn set(
    conn: &mut PgConnection,
    account: Uuid,
    color: Option<&str>,
) -> Result<(), sqlx::Error> {
    sqlx::query("UPDATE accounts SET theme_color = $2, updated_at = now() WHERE id = $1")
        .bind(account)
        .bind(color)
        .execute(conn)
        .await?;
    Ok(())
}

/// The stylesheet rules of every colour (appended to `pages.css` when it is served).
pub fn css() -> String {
    let mut light = String::new();
    let mut dark = String::new();
    for (name, l, d) in COLORS {
        light.push_str(&format!("body.theme-{name} {{ --accent: {l}; }}\n"));
        dark.push_str(&format!("  body.theme-{name} {{ --accent: {d}; }}\n"));
    }
    format!("{light}@media (prefers-color-scheme: dark) {{\n{dark}}}\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    /// WCAG relative luminance of `#rrggbb`.
    fn luminance(hex: &str) -> f64 {
        let c = |i: usize| {
            let v = f64::from(u8::from_str_radix(&hex[i..i + 2], 16).unwrap_or(0)) / 255.0;
            if v <= 0.03928 {
                v / 12.92
            } else {
                ((v + 0.055) / 1.055).powf(2.4)
            }
        };
        0.2126 * c(1) + 0.7152 * c(3) + 0.0722 * c(5)
    }

    #[test]
    fn every_colour_is_readable_as_link_text() {
        for (name, light, dark) in COLORS {
            let on_white = 1.05 / (luminance(light) + 0.05);
            assert!(on_white >= 4.5, "{name} light {light}: {on_white:.2}");
            // The dark scheme's background is #16161a.
            let on_dark = (luminance(dark) + 0.05) / (luminance("#16161a") + 0.05);
            assert!(on_dark >= 4.5, "{name} dark {dark}: {on_dark:.2}");
        }
        assert!(valid("jade") && !valid("Jade") && !valid("url(x)"));
        assert!(css().contains("body.theme-jade { --accent: #00795b; }"));
    }
}
