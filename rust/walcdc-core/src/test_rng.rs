//! A small deterministic random generator for the crate's tests (xorshift64*; no crates).

pub struct Rng(pub u64);

impl Rng {
    pub fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    pub fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }

    pub fn range(&mut self, lo: usize, hi: usize) -> usize {
        lo + self.below((hi - lo + 1) as u64) as usize
    }

    /// Random bytes, half the time compressible (a short random motif repeated).
    pub fn bytes(&mut self, len: usize) -> Vec<u8> {
        if self.below(2) == 0 {
            let motif: Vec<u8> = (0..self.range(1, 12)).map(|_| self.next() as u8).collect();
            motif.iter().cycle().take(len).copied().collect()
        } else {
            (0..len).map(|_| self.next() as u8).collect()
        }
    }
}
