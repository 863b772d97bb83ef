// glibc's malloc by default: under ten connectors mimalloc held about twice
// the resident memory for about a tenth fewer instructions per record, and
// no measurable CPU time (BENCHMARKS.md, "Worker memory"). The `mimalloc`
// feature chooses it.
#[cfg(feature = "mimalloc")]
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> std::process::ExitCode {
    sluice_runtime::cli::main()
}
