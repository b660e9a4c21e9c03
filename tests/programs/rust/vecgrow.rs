// Grows a Vec and a String: allocations through alloc::raw_vec and alloc::alloc.
#[inline(never)]
fn fill(n: usize) -> Vec<u64> {
    let mut v = Vec::new();
    for i in 0..n {
        v.push(i as u64);
    }
    v
}

#[inline(never)]
fn make_box() -> Box<[u8; 4000]> {
    Box::new([7u8; 4000])
}

fn main() {
    let v = fill(1000);
    let b = make_box();
    println!("{} {}", v.len(), b[0]);
}
