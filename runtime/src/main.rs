// glibc's malloc by default: mimalloc ran about a tenth fewer instructions
// per record, with no difference in CPU seconds the benches could measure,
// but held about twice the resident memory under ten connectors
// (BENCHMARKS.md, "Worker memory"). The `mimalloc` feature chooses it.
#[cfg(feature = "mimalloc")]
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> std::process::ExitCode {
    sluice_runtime::cli::main()
}
