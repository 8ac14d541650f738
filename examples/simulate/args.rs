//! The simulator's command line.

/// The command line, parsed.
pub struct Args {
    pub clients: Vec<usize>,
    pub runs: usize,
    pub seed: u64,
    pub csv: Option<String>,
    pub svg: Option<String>,
    pub open: bool,
    pub apf: bool,
    pub check: Option<String>,
}

/// Parses the command line: a clear message for any bad flag.
pub fn parse() -> Result<Args, String> {
    let mut args = Args {
        clients: (1..=19).map(|i| i * 10).collect(),
        runs: 100,
        seed: 1,
        csv: None,
        svg: None,
        open: false,
        apf: false,
        check: None,
    };
    let mut it = std::env::args().skip(1);
    while let Some(flag) = it.next() {
        let mut value = |name: &str| it.next().ok_or_else(|| format!("{name} needs a value"));
        match flag.as_str() {
            "--clients" => {
                args.clients = value("--clients")?
                    .split(',')
                    .map(|c| {
                        c.trim()
                            .parse::<usize>()
                            .map_err(|e| format!("--clients: {c:?}: {e}"))
                    })
                    .collect::<Result<_, _>>()?;
                if args.clients.iter().any(|&c| c == 0 || c > 100_000) {
                    return Err("--clients: each count must be in 1..=100000".into());
                }
            }
            "--runs" => {
                args.runs = value("--runs")?
                    .parse()
                    .map_err(|e| format!("--runs: {e}"))?;
                if args.runs == 0 {
                    return Err("--runs must be at least 1".into());
                }
            }
            "--seed" => {
                args.seed = value("--seed")?
                    .parse()
                    .map_err(|e| format!("--seed: {e}"))?
            }
            "--csv" => args.csv = Some(value("--csv")?),
            "--svg" => args.svg = Some(value("--svg")?),
            "--open" => args.open = true,
            "--apf" => args.apf = true,
            "--check" => args.check = Some(value("--check")?),
            "--bench" => {} // passed by `cargo bench` harnesses; ignore
            "-h" | "--help" => {
                return Err("usage: simulate [--clients 10,20,...] [--runs N] [--seed N] [--csv PATH] [--svg DIR] [--open | --apf] [--check REFERENCE.csv]".into());
            }
            other => return Err(format!("unknown argument {other:?} (try --help)")),
        }
    }
    Ok(args)
}
