//! `hollo-operator`: reconciles `Hollo` resources (`run`) and prints the CRD (`crd`).

mod budget;
mod crd;
mod leader;
mod phase;
mod resources;
mod status;
mod telemetry;
#[cfg(test)]
mod testutil;

use clap::{Parser, Subcommand};

#[derive(Parser)]
#[command(
    name = "hollo-operator",
    version,
    about = "Kubernetes operator for Hollo"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Print the Hollo CustomResourceDefinition as YAML.
    Crd,
}

fn main() -> anyhow::Result<()> {
    let cli = Cli::parse();
    match cli.command {
        Command::Crd => {
            print!("{}", crd::crd_yaml()?);
            Ok(())
        }
    }
}
