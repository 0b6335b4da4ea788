package pgsource

import "github.com/locktop/locktop/model"

// rowsAhead allocates room for a poll's snapshot rows while the server
// answers the poll: a goroutine makes zeroed room for the last poll's
// count of rows and a little more, and writes every page of it, so that
// the rows are not allocated, zeroed and faulted in after the last row
// arrives, when every microsecond is the poll's latency. A model.Lock is
// 416 bytes: 1,100 rows are 460 kB, and the runtime often hands back pages
// it returned to the OS, which fault in one by one when first written
// (issue 26: at 1,000 advisory locks and 100 row waits, the writes into
// fresh rows were a third of buildWith's time). A poll that finds more
// rows than the room holds allocates its own (see buildWith). last 0 (a
// Monitor's first poll) allocates nothing ahead.
func rowsAhead(last int) <-chan []model.Lock {
	room := make(chan []model.Lock, 1)
	if last == 0 {
		room <- nil
		return room
	}
	go func() {
		rows := make([]model.Lock, last+last/64+8)
		// clear writes every page of the array: a page the runtime took
		// back from the OS is faulted in here, off the poll's critical
		// path. The compiler does not drop it: it cannot know the memory
		// is zero already.
		clear(rows)
		room <- rows[:0]
	}()
	return room
}
