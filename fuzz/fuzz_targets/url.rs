//! URLs and paths: any string parses or fails with an error; a parsed
//! cloud URL prints back to a string that parses to the same location.
#![no_main]

use libfuzzer_sys::fuzz_target;
use shoal_core::Location;

fuzz_target!(|data: &[u8]| {
    let Ok(s) = std::str::from_utf8(data) else {
        return;
    };
    let Ok(loc) = Location::parse(s) else {
        return;
    };
    let _ = loc.basename();
    let _ = loc.is_prefix_like();
    if !loc.is_local() {
        let again = Location::parse(&loc.to_string())
            .unwrap_or_else(|e| panic!("{s:?} -> {loc} does not parse again: {e}"));
        assert_eq!(again, loc, "{s:?} round trip");
    }
});
