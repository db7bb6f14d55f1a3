// `sqlx::migrate!` embeds migrations/ at compile time but does not tell cargo to watch it, so an
// edited or added migration would otherwise leave a binary with the old schema.
fn main() {
    println!("cargo:rerun-if-changed=../migrations");
}
