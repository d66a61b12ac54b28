package hutch

import (
	"bufio"
	"bytes"
	"errors"
	"io"
)

// sseEvent is one server-sent event.
type sseEvent struct {
	Event string
	Data  []byte
}

// sseReader parses a text/event-stream. Lines may be of any length: they
// are read with bufio.Reader.ReadSlice and accumulated, never cut.
type sseReader struct {
	r   *bufio.Reader
	buf []byte // accumulates one long line
}

func newSSEReader(r io.Reader) *sseReader {
	return &sseReader{r: bufio.NewReaderSize(r, 64<<10)}
}

// readLine returns one line without its "\n" / "\r\n". At the end of the
// input it returns io.EOF (after any unterminated last line).
func (s *sseReader) readLine() ([]byte, error) {
	s.buf = s.buf[:0]
	for {
		chunk, err := s.r.ReadSlice('\n')
		if err == nil {
			var line []byte
			if len(s.buf) == 0 {
				line = chunk // valid until the next read: callers copy
			} else {
				s.buf = append(s.buf, chunk...)
				line = s.buf
			}
			line = line[:len(line)-1]
			if n := len(line); n > 0 && line[n-1] == '\r' {
				line = line[:n-1]
			}
			return line, nil
		}
		if errors.Is(err, bufio.ErrBufferFull) {
			s.buf = append(s.buf, chunk...)
			continue
		}
		s.buf = append(s.buf, chunk...)
		if len(s.buf) > 0 && err == io.EOF {
			// An unterminated last line: hand it out, EOF comes next.
			line := bytes.TrimSuffix(s.buf, []byte("\r"))
			return line, nil
		}
		return nil, err
	}
}

// next returns the next event. Comments (": ping") and id/retry fields are
// skipped. At the end of the stream it returns io.EOF; an event not yet
// terminated by a blank line when the stream ends is still delivered.
func (s *sseReader) next() (*sseEvent, error) {
	var (
		event   string
		data    []byte
		hasData bool
	)
	for {
		line, err := s.readLine()
		if err != nil {
			if err == io.EOF && hasData {
				return &sseEvent{Event: eventOrMessage(event), Data: data}, nil
			}
			return nil, err
		}
		if len(line) == 0 {
			if hasData {
				return &sseEvent{Event: eventOrMessage(event), Data: data}, nil
			}
			event = "" // an event with no data is not dispatched
			continue
		}
		if line[0] == ':' {
			continue // comment, e.g. ": ping"
		}
		field, value := line, []byte(nil)
		if i := bytes.IndexByte(line, ':'); i >= 0 {
			field, value = line[:i], line[i+1:]
			if len(value) > 0 && value[0] == ' ' {
				value = value[1:]
			}
		}
		switch string(field) {
		case "event":
			event = string(value)
		case "data":
			if hasData {
				data = append(data, '\n')
			}
			data = append(data, value...) // copies out of the reader's buffer
			hasData = true
		}
	}
}

func eventOrMessage(e string) string {
	if e == "" {
		return "message"
	}
	return e
}
