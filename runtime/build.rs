// `sqlx::migrate!` embeds migrations/ at compile time but does not tell cargo to watch it, so an
// edited or added migration would otherwise leave a binary with the old schema.
fn main() {
    println!("cargo:rerun-if-changed=../migrations");
    // the extra migration of the e2e-only feature `e2e-next`
    println!("cargo:rerun-if-changed=../e2e/next/migrations");
}
