//! Compiles the client API's `.proto` into Rust with `protox` (a protobuf compiler written in
//! Rust, so building needs no `protoc`) and `tonic-prost-build`.

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let proto_dir = concat!(env!("CARGO_MANIFEST_DIR"), "/../../proto");
    let proto = format!("{proto_dir}/augur/v1/augur.proto");
    println!("cargo:rerun-if-changed={proto}");
    let descriptors = protox::compile([&proto], [proto_dir])?;
    tonic_prost_build::configure()
        .build_server(true)
        .build_client(true)
        .compile_fds(descriptors)?;
    Ok(())
}
