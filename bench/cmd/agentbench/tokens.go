package main

import (
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/conchsh/conch/bench/internal/benchkit"
)

// samples are the recorded outputs of step 3, in bench/testdata, and
// seq 1 100000 (a command, not a file).
var samples = []struct{ file, what string }{
	{"npm-install.raw", "npm 11 install (real, loopback registry): spinner, colours"},
	{"npm6-install.raw", "npm 6 install (simulated gauge): progress bar, spinner, colours"},
	{"pip-install.raw", "pip 23 install (real, loopback index): rich progress bars"},
	{"cargo-build.raw", "cargo 1.95 build (real, offline): colours, progress bar, warnings"},
	{"service-log.raw", "service log (generated): 1.2 MB, repeated lines"},
	{seqSample, "seq 1 100000: 588,895 bytes of short distinct lines"},
}

// seqSample names the sample that runs `seq 1 100000` instead of cat.
const seqSample = "seq 1 100000"

// beforeConfig is the home config of the "before" server: the cap of an
// exec result at its former default, OpenClaw's 200000 characters.
const beforeConfig = `{"quotas":{"execPerSecond":0},"tools":{"exec":{"maxOutputChars":200000}}}`

// seqOutput is what seq 1 100000 prints.
func seqOutput() []byte {
	var b []byte
	for i := 1; i <= 100000; i++ {
		b = strconv.AppendInt(b, int64(i), 10)
		b = append(b, '\n')
	}
	return b
}

// tokenRow is one sample of step 3.
type tokenRow struct {
	File          string `json:"file"`
	What          string `json:"what"`
	RawBytes      int    `json:"rawBytes"`
	RawChars      int    `json:"rawChars"`
	RawTokens     int    `json:"rawTokens"`     // RawChars / 4
	StrippedChars int    `json:"strippedChars"` // baseline: escapes removed by a regexp, nothing else
	CleanChars    int    `json:"cleanChars"`
	CleanTokens   int    `json:"cleanTokens"`
	// BeforeChars and BeforeTokens are the result at maxOutputChars
	// 200000, the former default, from a second conch in the same run.
	BeforeChars     int     `json:"beforeChars"`
	BeforeTokens    int     `json:"beforeTokens"`
	BeforeTruncated bool    `json:"beforeTruncated"`
	Ratio           float64 `json:"ratio"`      // CleanChars / RawChars
	StripRatio      float64 `json:"stripRatio"` // StrippedChars / RawChars
	Truncated       bool    `json:"truncated"`
	EscLeft         int     `json:"escLeft"` // ESC bytes in the cleaned text
	CRLeft          int     `json:"crLeft"`
	Folds           int     `json:"folds"` // "[previous line repeated" markers
	LastLine        string  `json:"lastLine"`
	Ms              float64 `json:"ms"`
}

// ansiRe is the naive baseline cleaner: CSI and OSC sequences removed,
// carriage returns and everything else kept (what `sed` recipes do).
var ansiRe = regexp.MustCompile(`\x1b\[[0-?]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(\x07|\x1b\\)|\x1b[@-Z\\-_]`)

func (r *run) tokens() []tokenRow {
	s, err := startServer(r.ctx, r.o.conch, `{"quotas":{"execPerSecond":0}}`)
	if err != nil {
		r.fail("tokens: %v", err)
		return nil
	}
	defer s.Close()
	before, err := startServer(r.ctx, r.o.conch, beforeConfig)
	if err != nil {
		r.fail("tokens: %v", err)
		return nil
	}
	defer before.Close()
	var rows []tokenRow
	for _, sm := range samples {
		var raw []byte
		command := sm.file
		if sm.file == seqSample {
			raw = seqOutput()
		} else {
			path, err := filepath.Abs(filepath.Join(r.o.testdata, sm.file))
			if err != nil {
				r.fail("tokens: %v", err)
				continue
			}
			raw, err = os.ReadFile(path)
			if err != nil {
				r.fail("tokens: %v (record the samples with bench/testdata/record/record.sh)", err)
				continue
			}
			command = "cat " + path
		}
		args := map[string]any{"command": command, "yieldMs": 60000, "timeout": 60}
		old, err := before.Call(r.ctx, 2*time.Minute, "exec", args)
		if err != nil || old.IsError {
			r.fail("tokens %s (before): %v", sm.file, err)
			continue
		}
		t0 := time.Now()
		res, err := s.Call(r.ctx, 2*time.Minute, "exec", args)
		d := time.Since(t0)
		if err != nil {
			r.fail("tokens %s: %v", sm.file, err)
			continue
		}
		if res.IsError || res.Str("status") != "completed" {
			r.fail("tokens %s: status %q: %s", sm.file, res.Str("status"), benchkit.Clip(res.Text, 300))
			continue
		}
		rawChars := utf8.RuneCount(raw)
		stripped := utf8.RuneCountInString(ansiRe.ReplaceAllString(string(raw), ""))
		clean := utf8.RuneCountInString(res.Text)
		row := tokenRow{
			File: sm.file, What: sm.what, RawBytes: len(raw), RawChars: rawChars, RawTokens: benchkit.ApproxTokens(string(raw)),
			StrippedChars: stripped, CleanChars: clean, CleanTokens: benchkit.ApproxTokens(res.Text),
			BeforeChars: utf8.RuneCountInString(old.Text), BeforeTokens: benchkit.ApproxTokens(old.Text), BeforeTruncated: old.D["truncated"] == true,
			Ratio: benchkit.Ratio(float64(clean), float64(rawChars)), StripRatio: benchkit.Ratio(float64(stripped), float64(rawChars)),
			Truncated: res.D["truncated"] == true, EscLeft: strings.Count(res.Text, "\x1b"), CRLeft: strings.Count(res.Text, "\r"),
			Folds: strings.Count(res.Text, "[previous line repeated"), LastLine: lastLine(strings.TrimRight(res.Text, "\n")), Ms: benchkit.Ms(d),
		}
		if row.EscLeft > 0 {
			r.fail("tokens %s: %d ESC bytes left in the cleaned text", sm.file, row.EscLeft)
		}
		if r.o.dump != "" {
			os.MkdirAll(r.o.dump, 0o755)
			name := strings.ReplaceAll(strings.TrimSuffix(sm.file, ".raw"), " ", "-")
			os.WriteFile(filepath.Join(r.o.dump, name+".clean.txt"), []byte(res.Text), 0o644)
		}
		rows = append(rows, row)
	}
	return rows
}
