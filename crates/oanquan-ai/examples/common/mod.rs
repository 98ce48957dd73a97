//! Command-line parsing shared by the `book` and `tune` examples.

use oanquan_rules::Preset;

/// The value after `name` in `args`, or `default` without one; a value that does not parse
/// exits with status 2.
pub fn flag<T: std::str::FromStr>(args: &[String], name: &str, default: T) -> T {
    args.iter()
        .position(|a| a == name)
        .and_then(|i| args.get(i + 1))
        .map_or(default, |v| {
            v.parse().unwrap_or_else(|_| {
                eprintln!("{name} {v}: not a valid value");
                std::process::exit(2)
            })
        })
}

/// `--presets P,P,...` (default all three); an unknown preset exits with status 2.
pub fn presets(args: &[String]) -> Vec<Preset> {
    flag(
        args,
        "--presets",
        "standard,traditional,mancala-world".to_owned(),
    )
    .split(',')
    .map(|p| {
        p.parse().unwrap_or_else(|e| {
            eprintln!("{e}");
            std::process::exit(2)
        })
    })
    .collect()
}
