//! The root package has no library of its own: it holds the workspace's examples (`examples/`) and
//! integration tests (`tests/`, GPU tests among them). Cargo needs a target, so here is an empty one.
