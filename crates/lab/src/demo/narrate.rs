//! How the demo speaks: each step announced in bold before what it shows.

/// Prints `text` as the heading of the next step.
pub fn say(text: &str) {
    println!("\n\x1b[1m{text}\x1b[0m");
}
