//! Page-aligned, zero-initialised heap buffers for O_DIRECT I/O.

use std::alloc::{self, Layout};
use std::fmt;
use std::ptr::NonNull;

/// Alignment and length granule of every [`AlignedBuf`], in bytes.
pub const PAGE_SIZE: usize = 4096;

/// Buffers of at least this size start on a huge page and ask to be
/// backed by huge pages: a device takes a request in at most max_segments
/// physically contiguous pieces (254 on virtio-blk), so a 4 MiB read into
/// scattered 4 KiB pages is cut into ~1 MiB requests, and into 2 MiB huge
/// pages goes as one.
const HUGE_PAGE: usize = 2 << 20;

/// An owned heap buffer whose address and length are multiples of
/// [`PAGE_SIZE`], as O_DIRECT requires. Zero-initialised on creation.
///
/// Its length (what [`as_slice`](Self::as_slice) covers and what an I/O
/// transfers) may be set anywhere up to its capacity (the heap block's
/// size) with [`set_len`](Self::set_len), so that one buffer can be reused
/// for I/O of other sizes without a new allocation.
///
/// The heap block never moves while the `AlignedBuf` is alive, even when the
/// `AlignedBuf` value itself is moved; the I/O backends rely on this to hand
/// the pointer to the kernel while keeping the owner in a map.
pub struct AlignedBuf {
    ptr: NonNull<u8>,
    /// Bytes in use: a multiple of PAGE_SIZE, at least one page, <= cap.
    len: usize,
    /// Bytes of the heap block: a multiple of PAGE_SIZE, never changes.
    cap: usize,
}

// SAFETY: `AlignedBuf` uniquely owns its heap block (no aliasing pointers are
// handed out except through `&self`/`&mut self` borrows), exactly like a
// `Box<[u8]>`, so moving it to another thread is sound.
unsafe impl Send for AlignedBuf {}
// SAFETY: shared access only yields `&[u8]`; mutation needs `&mut self`.
// Same reasoning as for `Box<[u8]>`, which is `Sync`.
unsafe impl Sync for AlignedBuf {}

impl AlignedBuf {
    /// Allocates a zeroed buffer of `len` bytes rounded up to a multiple of
    /// [`PAGE_SIZE`] (at least one page).
    ///
    /// # Panics
    /// Panics if the rounded length overflows `isize` (like `Vec` does on
    /// capacity overflow); aborts via [`alloc::handle_alloc_error`] if the
    /// allocator fails.
    pub fn new(len: usize) -> Self {
        let len = Self::round(len);
        let layout = Self::layout(len);
        if layout.align() < HUGE_PAGE {
            // SAFETY: `layout` has a non-zero size (len >= PAGE_SIZE) as
            // `alloc_zeroed` requires.
            let raw = unsafe { alloc::alloc_zeroed(layout) };
            let Some(ptr) = NonNull::new(raw) else {
                alloc::handle_alloc_error(layout)
            };
            return Self { ptr, len, cap: len };
        }
        // SAFETY: `layout` has a non-zero size, as `alloc` requires.
        let raw = unsafe { alloc::alloc(layout) };
        let Some(ptr) = NonNull::new(raw) else {
            alloc::handle_alloc_error(layout)
        };
        // SAFETY: [raw, raw + len) is the block just allocated, on a huge
        // page boundary (the layout's alignment): madvise only changes how
        // the kernel backs it (huge pages where it can) and never its
        // contents; then every byte of it is written (zeroed) before any
        // read, so no uninitialised byte is ever seen.
        unsafe {
            let rc = libc::madvise(raw.cast(), len, libc::MADV_HUGEPAGE);
            let _ = rc; // EINVAL where THP is unsupported: small pages, as before.
            std::ptr::write_bytes(raw, 0, len);
        }
        Self { ptr, len, cap: len }
    }

    /// `len` rounded up to a multiple of [`PAGE_SIZE`], at least one page.
    fn round(len: usize) -> usize {
        len.max(1)
            .checked_next_multiple_of(PAGE_SIZE)
            .expect("AlignedBuf: capacity overflow")
    }

    /// The block's layout: page-aligned, or huge-page-aligned from
    /// [`HUGE_PAGE`] up (the same for a capacity every time: `cap` never
    /// changes, so `Drop` frees with the layout `new` allocated).
    fn layout(cap: usize) -> Layout {
        let align = if cap >= HUGE_PAGE {
            HUGE_PAGE
        } else {
            PAGE_SIZE
        };
        Layout::from_size_align(cap, align).expect("AlignedBuf: capacity overflow")
    }

    /// Length in bytes (a multiple of [`PAGE_SIZE`]).
    pub fn len(&self) -> usize {
        self.len
    }

    /// Size of the heap block in bytes (a multiple of [`PAGE_SIZE`]): the
    /// largest length [`set_len`](Self::set_len) accepts.
    pub fn capacity(&self) -> usize {
        self.cap
    }

    /// Sets the length to `len` rounded up to a multiple of [`PAGE_SIZE`]
    /// (at least one page), without allocating. The bytes keep whatever
    /// they held: zeroes or data of earlier use, never uninitialised memory.
    ///
    /// # Panics
    /// Panics if the rounded length exceeds [`capacity`](Self::capacity).
    pub fn set_len(&mut self, len: usize) {
        let len = Self::round(len);
        assert!(
            len <= self.cap,
            "AlignedBuf: length {len} over capacity {}",
            self.cap
        );
        self.len = len;
    }

    /// Always false: a buffer holds at least one page.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The whole buffer as bytes.
    pub fn as_slice(&self) -> &[u8] {
        // SAFETY: `ptr` points to `cap >= len` bytes owned by `self`, all
        // initialised: zeroed at allocation, later only written through
        // `&mut` slices (or by the kernel's I/O) of a prefix of the block,
        // and `set_len` never de-initialises. The returned borrow is tied to
        // `&self`, so no `&mut` can coexist.
        unsafe { std::slice::from_raw_parts(self.ptr.as_ptr(), self.len) }
    }

    /// The whole buffer as mutable bytes.
    pub fn as_mut_slice(&mut self) -> &mut [u8] {
        // SAFETY: as in `as_slice`, and the borrow is tied to `&mut self`, so
        // it is the only live reference to the block.
        unsafe { std::slice::from_raw_parts_mut(self.ptr.as_ptr(), self.len) }
    }

    /// Raw pointer to the first byte (page-aligned), for handing to the kernel.
    pub fn as_ptr(&self) -> *const u8 {
        self.ptr.as_ptr()
    }

    /// Raw mutable pointer to the first byte (page-aligned).
    pub fn as_mut_ptr(&mut self) -> *mut u8 {
        self.ptr.as_ptr()
    }
}

impl Drop for AlignedBuf {
    fn drop(&mut self) {
        // SAFETY: `ptr` was returned by `alloc_zeroed` or `alloc` with exactly
        // `Self::layout(self.cap)` (cap never changes), and it is freed only
        // here, once.
        unsafe { alloc::dealloc(self.ptr.as_ptr(), Self::layout(self.cap)) }
    }
}

impl fmt::Debug for AlignedBuf {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("AlignedBuf")
            .field("ptr", &self.ptr)
            .field("len", &self.len)
            .field("cap", &self.cap)
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rounds_up_and_is_aligned() {
        for (asked, want) in [
            (0, 4096),
            (1, 4096),
            (4096, 4096),
            (4097, 8192),
            (1 << 20, 1 << 20),
        ] {
            let b = AlignedBuf::new(asked);
            assert_eq!(b.len(), want, "asked {asked}");
            assert_eq!(b.as_ptr() as usize % PAGE_SIZE, 0);
            assert_eq!(b.len() % PAGE_SIZE, 0);
            assert!(!b.is_empty());
        }
    }

    #[test]
    fn large_buffers_start_on_a_huge_page_and_are_zeroed() {
        for len in [HUGE_PAGE, 4 << 20, HUGE_PAGE + PAGE_SIZE] {
            let b = AlignedBuf::new(len);
            assert_eq!(b.as_ptr() as usize % HUGE_PAGE, 0, "{len}");
            assert_eq!(b.len(), len);
            assert!(b.as_slice().iter().all(|&x| x == 0));
        }
        // Below a huge page: page-aligned, as before.
        let b = AlignedBuf::new(HUGE_PAGE - PAGE_SIZE);
        assert_eq!(b.as_ptr() as usize % PAGE_SIZE, 0);
    }

    #[test]
    fn zeroed_and_writable() {
        let mut b = AlignedBuf::new(3 * PAGE_SIZE);
        assert!(b.as_slice().iter().all(|&x| x == 0));
        b.as_mut_slice()[PAGE_SIZE + 7] = 0xAB;
        assert_eq!(b.as_slice()[PAGE_SIZE + 7], 0xAB);
        // Moving the owner does not move the heap block.
        let p = b.as_ptr();
        let moved = std::thread::spawn(move || b).join().unwrap();
        assert_eq!(moved.as_ptr(), p);
        assert_eq!(moved.as_slice()[PAGE_SIZE + 7], 0xAB);
    }

    #[test]
    fn set_len_reuses_the_block_up_to_capacity() {
        let mut b = AlignedBuf::new(4 * PAGE_SIZE);
        b.as_mut_slice()[PAGE_SIZE] = 0x5A;
        let p = b.as_ptr();
        b.set_len(1);
        assert_eq!((b.len(), b.capacity()), (PAGE_SIZE, 4 * PAGE_SIZE));
        assert_eq!(b.as_slice().len(), PAGE_SIZE);
        b.set_len(2 * PAGE_SIZE - 1);
        assert_eq!(b.len(), 2 * PAGE_SIZE);
        // Same block, old data kept (initialised, never exposed as garbage).
        assert_eq!(b.as_ptr(), p);
        assert_eq!(b.as_slice()[PAGE_SIZE], 0x5A);
        b.set_len(4 * PAGE_SIZE);
        assert_eq!(b.as_mut_slice().len(), 4 * PAGE_SIZE);
    }

    #[test]
    #[should_panic(expected = "over capacity")]
    fn set_len_past_capacity_panics() {
        AlignedBuf::new(PAGE_SIZE).set_len(PAGE_SIZE + 1);
    }

    #[test]
    fn is_send_and_sync() {
        fn check<T: Send + Sync>() {}
        check::<AlignedBuf>();
    }
}
