#!/usr/bin/env bash
# Writes a small Cargo workspace with path dependencies only (builds
# offline) into $1: several crates that take a moment to compile and a few
# warnings, so that `cargo build` draws its progress bar and colours.
set -euo pipefail
dir=$1
mkdir -p "$dir"
crates=(demo-util demo-model demo-codec demo-store demo-net demo-cli)
deps_demo_model=(demo-util)
deps_demo_codec=(demo-util demo-model)
deps_demo_store=(demo-model demo-codec)
deps_demo_net=(demo-codec)
deps_demo_cli=(demo-util)

# Code that keeps rustc busy for a moment: many monomorphised generics.
body() {
	local n=$1
	echo 'pub trait Shape { fn area(&self) -> f64; fn name(&self) -> String; }'
	for i in $(seq 1 "$n"); do
		cat <<RS
#[derive(Debug, Clone, PartialEq, Default)]
pub struct S$i { pub a: f64, pub b: f64, pub tag: String, pub items: Vec<u64> }
impl Shape for S$i { fn area(&self) -> f64 { self.a * self.b + $i.0 } fn name(&self) -> String { format!("S$i {:?}", self) } }
pub fn total_$i<T: Shape + Clone + std::fmt::Debug>(xs: &[T]) -> (f64, Vec<String>) {
    let mut names: Vec<String> = xs.iter().map(|x| x.name()).collect();
    names.sort();
    (xs.iter().map(|x| x.area()).sum(), names)
}
pub fn use_$i() -> f64 { let v = vec![S$i::default(); 3]; total_$i(&v).0 }
RS
	done
}

for c in "${crates[@]}"; do
	mkdir -p "$dir/$c/src"
	var="deps_${c//-/_}[@]"
	{
		printf '[package]\nname = "%s"\nversion = "0.3.1"\nedition = "2021"\n\n[dependencies]\n' "$c"
		for d in ${!var+"${!var}"}; do printf '%s = { path = "../%s" }\n' "$d" "$d"; done
	} > "$dir/$c/Cargo.toml"
	body 60 > "$dir/$c/src/lib.rs"
done
# Warnings, as real projects have them.
cat >> "$dir/demo-store/src/lib.rs" <<'RS'
pub fn open_store(path: &str) -> usize {
    let retries = 3;
    let unused_buffer: Vec<u8> = Vec::with_capacity(1024);
    path.len()
}
fn compact_segments() {}
RS
cat >> "$dir/demo-net/src/lib.rs" <<'RS'
use std::collections::HashMap;
pub fn connect(addr: &str) -> Result<(), String> {
    let mut timeout_ms = 500;
    if addr.is_empty() { return Err("empty address".into()); }
    Ok(())
}
RS
mkdir -p "$dir/demo-app/src"
{
	printf '[package]\nname = "demo-app"\nversion = "1.4.0"\nedition = "2021"\n\n[dependencies]\n'
	for d in "${crates[@]}"; do printf '%s = { path = "../%s" }\n' "$d" "$d"; done
} > "$dir/demo-app/Cargo.toml"
cat > "$dir/demo-app/src/main.rs" <<'RS'
fn main() {
    let n = demo_util::use_1() + demo_model::use_2() + demo_codec::use_3();
    let s = demo_store::open_store("/tmp/store");
    let _ = demo_net::connect("127.0.0.1:9");
    println!("{} {} {}", n, s, demo_cli::use_4());
}
RS
printf '[workspace]\nresolver = "2"\nmembers = [%s, "demo-app"]\n' "$(printf '"%s", ' "${crates[@]}" | sed 's/, $//')" > "$dir/Cargo.toml"
