"""tdaxsim -- `tdax trace` and `tdax sim`: traces of the runtime, replayed
through the same policy code (build/lib/libtdaxtrack.so) and others."""
