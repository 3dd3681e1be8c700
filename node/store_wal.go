package node

import (
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"os"
	"path/filepath"

	"go.etcd.io/bbolt"
)

// The vote store's write-ahead log (BoltStore). A batch of Saves is made
// durable by appending one frame to the log and fdatasyncing the log file
// once; the records and audit entries reach the bbolt file later, many
// batches in one bbolt transaction (a checkpoint), off the path of the
// votes. A bbolt commit costs two fsyncs (data pages, then the meta page)
// and writes several pages; a frame costs one fdatasync of bytes written
// over a preallocated file, which needs no journal commit of the file's
// metadata.
//
// A frame is
//
//	magic   4 bytes "PWAL"
//	crc     4 bytes, CRC-32C of everything after it (header rest and payload)
//	length  4 bytes, of the payload
//	lsn     8 bytes, the frame's number
//	store  16 bytes, the store's random ID (bbolt meta key "id")
//	payload: count 4 bytes, then per Save: key, value (the record's JSON),
//	  audit count 4 bytes, then per entry: seq 8 bytes, JSON; each key,
//	  value and JSON as length 4 bytes and bytes
//
// all integers big-endian. Frames lie one after another from offset 0.
// bbolt's meta bucket holds the number of the last frame whose contents
// bbolt has (key "wal-lsn", committed in the checkpoint's transaction).
// After a checkpoint the log is written again from offset 0 with the next
// numbers, so every frame left over from before has a number at or below
// bbolt's and is not replayed. Replay (at open, and ReadAudit) reads frames
// from offset 0 while each has the magic, this store's ID, the next number
// and a matching CRC, and stops at the first that does not: a frame torn
// by a crash was never acknowledged, and nothing after it was written
// (frames are written one at a time, each fdatasynced before the next).

const (
	walMagic      = "PWAL"
	walHeaderSize = 4 + 4 + 4 + 8 + 16
	// walPrealloc is the log's size when created (written with zeros, so
	// that its blocks are allocated and an fdatasync of a frame within it
	// flushes data only).
	walPrealloc = 4 << 20
	// walMaxFrame bounds a frame's payload when replaying: a length above
	// it is garbage.
	walMaxFrame = 1 << 30
	// walSuffix names the log: the bbolt file's path with this suffix.
	walSuffix = "-wal"
)

var (
	boltKeyWALLSN  = []byte("wal-lsn")
	boltKeyStoreID = []byte("id")
	walCRC         = crc32.MakeTable(crc32.Castagnoli)
)

// walSave is one Save as the log holds it.
type walSave struct {
	key   []byte
	value []byte
	audit []walAudit
}

// walAudit is one audit entry with its sequence number, encoded.
type walAudit struct {
	seq   uint64
	value []byte
}

// appendFrame appends the frame of saves, numbered lsn, to dst.
func appendFrame(dst []byte, lsn uint64, id [16]byte, saves []walSave) []byte {
	start := len(dst)
	dst = append(dst, walMagic...)
	dst = append(dst, 0, 0, 0, 0, 0, 0, 0, 0) // crc, length: filled below
	dst = binary.BigEndian.AppendUint64(dst, lsn)
	dst = append(dst, id[:]...)
	body := len(dst)
	dst = binary.BigEndian.AppendUint32(dst, uint32(len(saves)))
	for _, s := range saves {
		dst = appendBytes(dst, s.key)
		dst = appendBytes(dst, s.value)
		dst = binary.BigEndian.AppendUint32(dst, uint32(len(s.audit)))
		for _, a := range s.audit {
			dst = binary.BigEndian.AppendUint64(dst, a.seq)
			dst = appendBytes(dst, a.value)
		}
	}
	binary.BigEndian.PutUint32(dst[start+8:], uint32(len(dst)-body))
	binary.BigEndian.PutUint32(dst[start+4:], crc32.Checksum(dst[start+8:], walCRC))
	return dst
}

func appendBytes(dst, b []byte) []byte {
	dst = binary.BigEndian.AppendUint32(dst, uint32(len(b)))
	return append(dst, b...)
}

// readFrames reads the frames of r numbered from next on and belonging to
// store id, in order, stopping at the first that is not (see above). It
// returns them and the number of the last one (next-1 if none).
func readFrames(r io.ReaderAt, size int64, next uint64, id [16]byte) (frames [][]walSave, last uint64, err error) {
	last = next - 1
	var hdr [walHeaderSize]byte
	for off := int64(0); off+walHeaderSize <= size; {
		if _, err := r.ReadAt(hdr[:], off); err != nil {
			return nil, 0, fmt.Errorf("read the log at %d: %w", off, err)
		}
		n := int64(binary.BigEndian.Uint32(hdr[8:]))
		if string(hdr[:4]) != walMagic || binary.BigEndian.Uint64(hdr[12:]) != last+1 ||
			[16]byte(hdr[20:36]) != id || n > walMaxFrame || off+walHeaderSize+n > size {
			break
		}
		buf := make([]byte, walHeaderSize-8+n)
		copy(buf, hdr[8:])
		if _, err := r.ReadAt(buf[walHeaderSize-8:], off+walHeaderSize); err != nil {
			return nil, 0, fmt.Errorf("read the log at %d: %w", off, err)
		}
		if crc32.Checksum(buf, walCRC) != binary.BigEndian.Uint32(hdr[4:]) {
			break
		}
		saves, err := decodeFrame(buf[walHeaderSize-8:])
		if err != nil {
			// The CRC matched: the frame is whole, yet undecodable. That is
			// a bug, not a torn write: refuse rather than lose votes.
			return nil, 0, fmt.Errorf("frame %d at %d: %w", last+1, off, err)
		}
		frames = append(frames, saves)
		last++
		off += walHeaderSize + n
	}
	return frames, last, nil
}

var errFrame = errors.New("malformed log frame")

func decodeFrame(b []byte) ([]walSave, error) {
	u32 := func() (uint32, bool) {
		if len(b) < 4 {
			return 0, false
		}
		v := binary.BigEndian.Uint32(b)
		b = b[4:]
		return v, true
	}
	bytesOf := func() ([]byte, bool) {
		n, ok := u32()
		if !ok || uint64(n) > uint64(len(b)) {
			return nil, false
		}
		v := b[:n:n]
		b = b[n:]
		return v, true
	}
	count, ok := u32()
	if !ok || uint64(count) > uint64(len(b)) {
		return nil, errFrame
	}
	saves := make([]walSave, 0, count)
	for range count {
		var s walSave
		var na uint32
		if s.key, ok = bytesOf(); !ok {
			return nil, errFrame
		}
		if s.value, ok = bytesOf(); !ok {
			return nil, errFrame
		}
		if na, ok = u32(); !ok || uint64(na) > uint64(len(b)) {
			return nil, errFrame
		}
		for range na {
			if len(b) < 8 {
				return nil, errFrame
			}
			a := walAudit{seq: binary.BigEndian.Uint64(b)}
			b = b[8:]
			if a.value, ok = bytesOf(); !ok {
				return nil, errFrame
			}
			s.audit = append(s.audit, a)
		}
		saves = append(saves, s)
	}
	if len(b) != 0 {
		return nil, errFrame
	}
	return saves, nil
}

// openWAL opens the log at path, creating and preallocating it (and
// syncing it and its directory) if it does not exist.
func openWAL(path string) (*os.File, error) {
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err == nil {
		return f, nil
	}
	if !errors.Is(err, os.ErrNotExist) {
		return nil, err
	}
	tmp := path + ".new"
	f, err = os.OpenFile(tmp, os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return nil, err
	}
	fail := func(err error) (*os.File, error) {
		_ = f.Close()
		_ = os.Remove(tmp)
		return nil, err
	}
	if _, err := f.Write(make([]byte, walPrealloc)); err != nil {
		return fail(err)
	}
	if err := f.Sync(); err != nil {
		return fail(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return fail(err)
	}
	if err := syncDir(filepath.Dir(path)); err != nil {
		_ = f.Close()
		return nil, err
	}
	return f, nil
}

// syncDir fsyncs a directory, so that a file created in it survives a
// crash.
func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	return errors.Join(d.Sync(), d.Close())
}

// newStoreID draws a store's random ID.
func newStoreID() ([16]byte, error) {
	var id [16]byte
	_, err := rand.Read(id[:])
	return id, err
}

// loggedAudit returns the audit entries that the log of the bbolt file at
// dbPath holds beyond the file (left there by a crash, until the store is
// opened again), read only; meta is the file's meta bucket (nil if none).
func loggedAudit(dbPath string, meta *bbolt.Bucket) ([]walAudit, error) {
	if meta == nil || len(meta.Get(boltKeyStoreID)) != 16 {
		return nil, nil // no log was ever written for this file
	}
	f, err := os.Open(dbPath + walSuffix)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("write-ahead log: %w", err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("write-ahead log: %w", err)
	}
	frames, _, err := readFrames(f, fi.Size(), walLSN(meta)+1, [16]byte(meta.Get(boltKeyStoreID)))
	if err != nil {
		return nil, fmt.Errorf("write-ahead log: %w", err)
	}
	var out []walAudit
	for _, saves := range frames {
		for _, s := range saves {
			out = append(out, s.audit...)
		}
	}
	return out, nil
}
