//! GCS objects.list responses: any bytes parse or fail with an error.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let _ = shoal_gcs::parse_list_page(data);
});
