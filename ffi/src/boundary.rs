//! The panic boundary and the checks every pointer from C goes through.
//!
//! Each exported function runs its body inside [`guard`] (or [`guard_value`]) so that a
//! panic becomes `REDLOCK_PANIC` instead of unwinding into C, and reads its pointer
//! arguments only through the macros below, which return `REDLOCK_NULL_PARAMETER`
//! (or the getter's fallback) for NULL.

use std::mem::MaybeUninit;
use std::panic::{catch_unwind, AssertUnwindSafe};

use crate::error::redlock_result;

/// Runs `body`, turning a panic into `REDLOCK_PANIC`.
#[inline(always)]
pub(crate) fn guard(body: impl FnOnce() -> redlock_result) -> redlock_result {
    catch_unwind(AssertUnwindSafe(body)).unwrap_or(redlock_result::REDLOCK_PANIC)
}

/// Runs `body`, turning a panic into `fallback` (for getters that return a value).
#[inline(always)]
pub(crate) fn guard_value<T>(fallback: T, body: impl FnOnce() -> T) -> T {
    catch_unwind(AssertUnwindSafe(body)).unwrap_or(fallback)
}

/// The handle behind a `*const T`, or an early return of `REDLOCK_NULL_PARAMETER` (or
/// of the given fallback, in getters).
macro_rules! arg_ref {
    ($ptr:expr) => {
        arg_ref!($ptr, $crate::error::redlock_result::REDLOCK_NULL_PARAMETER)
    };
    ($ptr:expr, $fallback:expr) => {{
        let ptr = $ptr;
        // SAFETY: by the crate's contract a non-NULL pointer is a live object of its
        // type that no other thread uses during this call.
        match unsafe { ptr.as_ref() } {
            Some(value) => value,
            None => return $fallback,
        }
    }};
}

/// The handle behind a `*mut T`, mutably, or an early return as for `arg_ref!`.
macro_rules! arg_mut {
    ($ptr:expr) => {
        arg_mut!($ptr, $crate::error::redlock_result::REDLOCK_NULL_PARAMETER)
    };
    ($ptr:expr, $fallback:expr) => {{
        let ptr = $ptr;
        // SAFETY: by the crate's contract a non-NULL pointer is a live object of its
        // type that nothing else accesses during this call.
        match unsafe { ptr.as_mut() } {
            Some(value) => value,
            None => return $fallback,
        }
    }};
}

/// An output parameter, checked for NULL up front and written later with `.write()`.
macro_rules! arg_out {
    ($ptr:expr) => {{
        let ptr = $ptr;
        // SAFETY: by the crate's contract a non-NULL output pointer is valid for a
        // write of its type; `MaybeUninit` makes no claim about the current contents.
        match unsafe { $crate::boundary::out_slot(ptr) } {
            Some(slot) => slot,
            None => return $crate::error::redlock_result::REDLOCK_NULL_PARAMETER,
        }
    }};
}

/// A `(ptr, len)` byte string; NULL is accepted for length 0.
macro_rules! arg_bytes {
    ($ptr:expr, $len:expr) => {{
        let (ptr, len) = ($ptr, $len);
        // SAFETY: by the crate's contract a non-NULL `ptr` points to `len` readable
        // bytes that stay unchanged during this call.
        match unsafe { $crate::boundary::bytes(ptr, len) } {
            Ok(bytes) => bytes,
            Err(code) => return code,
        }
    }};
}

/// `count` byte strings given as an array of pointers and an array of lengths.
macro_rules! arg_byte_strings {
    ($ptrs:expr, $lens:expr, $count:expr) => {{
        let (ptrs, lens, count) = ($ptrs, $lens, $count);
        // SAFETY: by the crate's contract both arrays hold `count` elements and each
        // non-NULL pointer points to as many readable bytes as its length says.
        match unsafe { $crate::boundary::byte_strings(ptrs, lens, count) } {
            Ok(strings) => strings,
            Err(code) => return code,
        }
    }};
}

/// # Safety
/// `ptr` is NULL or valid for a write of `T`.
pub(crate) unsafe fn out_slot<'a, T>(ptr: *mut T) -> Option<&'a mut MaybeUninit<T>> {
    // SAFETY: the caller guarantees `ptr` is NULL or writable; `MaybeUninit<T>` has the
    // layout of `T` and needs no initialised contents.
    unsafe { ptr.cast::<MaybeUninit<T>>().as_mut() }
}

/// # Safety
/// A non-NULL `ptr` points to `len` readable bytes that live for `'a`.
pub(crate) unsafe fn bytes<'a>(ptr: *const u8, len: usize) -> Result<&'a [u8], redlock_result> {
    if len == 0 {
        return Ok(&[]);
    }
    if ptr.is_null() {
        return Err(redlock_result::REDLOCK_NULL_PARAMETER);
    }
    if len > isize::MAX as usize {
        return Err(redlock_result::REDLOCK_INVALID_INPUT);
    }
    // SAFETY: non-NULL, `len` readable bytes by the caller's guarantee, and no larger
    // than `isize::MAX`.
    Ok(unsafe { std::slice::from_raw_parts(ptr, len) })
}

/// Byte strings borrowed from C: inline for the usual handful, on the heap beyond.
pub(crate) enum ByteStrings<'a> {
    Inline([&'a [u8]; INLINE_STRINGS], usize),
    Heap(Vec<&'a [u8]>),
}

/// Resources one lock usually covers, kept off the heap.
const INLINE_STRINGS: usize = 8;

impl<'a> std::ops::Deref for ByteStrings<'a> {
    type Target = [&'a [u8]];

    fn deref(&self) -> &[&'a [u8]] {
        match self {
            ByteStrings::Inline(items, count) => &items[..*count],
            ByteStrings::Heap(items) => items,
        }
    }
}

/// # Safety
/// For `count > 0`, `ptrs` and `lens` point to `count` elements each, and every
/// pointer in `ptrs` is NULL or points to as many readable bytes as its length.
pub(crate) unsafe fn byte_strings<'a>(
    ptrs: *const *const u8,
    lens: *const usize,
    count: usize,
) -> Result<ByteStrings<'a>, redlock_result> {
    if count == 0 {
        return Ok(ByteStrings::Inline([&[]; INLINE_STRINGS], 0));
    }
    if ptrs.is_null() || lens.is_null() {
        return Err(redlock_result::REDLOCK_NULL_PARAMETER);
    }
    if count > isize::MAX as usize / std::mem::size_of::<usize>() {
        return Err(redlock_result::REDLOCK_INVALID_INPUT);
    }
    // SAFETY: both arrays are non-NULL and hold `count` elements (caller's guarantee).
    let (ptrs, lens) = unsafe {
        (
            std::slice::from_raw_parts(ptrs, count),
            std::slice::from_raw_parts(lens, count),
        )
    };
    let mut strings = if count <= INLINE_STRINGS {
        ByteStrings::Inline([&[]; INLINE_STRINGS], count)
    } else {
        ByteStrings::Heap(Vec::with_capacity(count))
    };
    for (i, (&ptr, &len)) in ptrs.iter().zip(lens).enumerate() {
        // SAFETY: each element is NULL or points to `len` readable bytes (caller's
        // guarantee), checked by `bytes`.
        let string = unsafe { bytes(ptr, len) }?;
        match &mut strings {
            ByteStrings::Inline(items, _) => items[i] = string,
            ByteStrings::Heap(items) => items.push(string),
        }
    }
    Ok(strings)
}

/// Hands a new object to C. The pointer is freed only by [`free_handle`].
pub(crate) fn into_handle<T>(value: T) -> *mut T {
    Box::into_raw(Box::new(value))
}

/// Frees a handle made by [`into_handle`]; NULL is ignored.
///
/// # Safety
/// `ptr` is NULL or came from `into_handle::<T>` and was not freed before.
pub(crate) unsafe fn free_handle<T>(ptr: *mut T) {
    if !ptr.is_null() {
        // SAFETY: the caller guarantees `ptr` came from `Box::into_raw` in
        // `into_handle` and is freed only once.
        drop(unsafe { Box::from_raw(ptr) });
    }
}

/// Writes a borrowed byte string to a `(ptr, len)` output pair.
pub(crate) fn put_bytes(
    out_ptr: &mut MaybeUninit<*const u8>,
    out_len: &mut MaybeUninit<usize>,
    bytes: &[u8],
) {
    out_ptr.write(bytes.as_ptr());
    out_len.write(bytes.len());
}

/// Copies `bytes` into a caller's buffer, or fails with `REDLOCK_BUFFER_TOO_SMALL`
/// (writing nothing) when `capacity` is short. With `nul`, a NUL terminator follows
/// the bytes (it is not counted in `out_len`).
///
/// # Safety
/// A non-NULL `buf` is writable for `capacity` bytes.
pub(crate) unsafe fn copy_out(
    bytes: &[u8],
    nul: bool,
    buf: *mut u8,
    capacity: usize,
    out_len: *mut usize,
) -> redlock_result {
    if buf.is_null() {
        return redlock_result::REDLOCK_NULL_PARAMETER;
    }
    let out_len = arg_out!(out_len);
    let needed = bytes.len() + usize::from(nul);
    if capacity < needed {
        return redlock_result::REDLOCK_BUFFER_TOO_SMALL;
    }
    // SAFETY: `buf` is writable for `capacity >= needed` bytes (caller's guarantee),
    // and our `bytes` cannot overlap a buffer the caller owns.
    unsafe {
        std::ptr::copy_nonoverlapping(bytes.as_ptr(), buf, bytes.len());
        if nul {
            buf.add(bytes.len()).write(0);
        }
    }
    out_len.write(bytes.len());
    redlock_result::REDLOCK_OK
}

/// Writes each argument's pointer and length into `args` and `arg_lens`, caller arrays of
/// `capacity` elements; returns the count, or `REDLOCK_BUFFER_TOO_SMALL` (nothing
/// written) when `capacity` is below it. The pointers borrow from `items`.
///
/// # Safety
/// `args` and `arg_lens` are non-NULL and writable for `capacity` elements each.
pub(crate) unsafe fn put_args<'a>(
    items: impl ExactSizeIterator<Item = &'a [u8]>,
    args: *mut *const u8,
    arg_lens: *mut usize,
    capacity: usize,
) -> Result<usize, redlock_result> {
    let count = items.len();
    if capacity < count {
        return Err(redlock_result::REDLOCK_BUFFER_TOO_SMALL);
    }
    for (i, arg) in items.enumerate() {
        // SAFETY: both arrays are writable for `capacity >= count > i` elements by the
        // caller's guarantee.
        unsafe {
            args.add(i).write(arg.as_ptr());
            arg_lens.add(i).write(arg.len());
        }
    }
    Ok(count)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_panic_becomes_a_result() {
        let result = guard(|| panic!("boom"));
        assert_eq!(result, redlock_result::REDLOCK_PANIC);
        assert_eq!(guard_value(7u32, || panic!("boom")), 7);
        assert_eq!(
            guard(|| redlock_result::REDLOCK_OK),
            redlock_result::REDLOCK_OK
        );
    }

    #[test]
    fn byte_strings_are_checked() {
        // SAFETY: NULL with length 0 and a real array are what the contract allows.
        unsafe {
            assert_eq!(bytes(std::ptr::null(), 0), Ok(&[][..]));
            assert_eq!(
                bytes(std::ptr::null(), 1),
                Err(redlock_result::REDLOCK_NULL_PARAMETER)
            );
            let data = [b"ab".as_ptr(), std::ptr::null()];
            let lens = [2usize, 1];
            assert!(matches!(
                byte_strings(data.as_ptr(), lens.as_ptr(), 2),
                Err(redlock_result::REDLOCK_NULL_PARAMETER)
            ));
            let one = byte_strings(data.as_ptr(), lens.as_ptr(), 1).unwrap();
            assert_eq!(&*one, &[&b"ab"[..]]);
            let none = byte_strings(std::ptr::null(), std::ptr::null(), 0).unwrap();
            assert!(none.is_empty());
            let many_data = [b"x".as_ptr(); 9];
            let many_lens = [1usize; 9];
            let many = byte_strings(many_data.as_ptr(), many_lens.as_ptr(), 9).unwrap();
            assert_eq!(many.len(), 9);
        }
    }
}
