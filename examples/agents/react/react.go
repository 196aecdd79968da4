// Package react is a small ReAct-style research agent: it reads the task (prompt.md, the
// submission's file, header and row count from task.yaml, the files under /public), asks
// its model for a plan through the OpenAI chat-completions API in Thought/Action turns
// (actions: list_files[DIR], read_file[FILE], then "Final Answer: {JSON}" with one value per
// submission column), and writes the submission: the header from task.yaml, one row per
// expected row, columns that the task's test file also has copied from it (ids), the
// others from the model's answer. It works on any imported AIRS-Bench bundle (public/train/
// and public/test/ folders included) as well as on the generated examples.
//
// It talks to OPENAI_BASE_URL (the model beside it, docs/agents.md) and imports nothing
// of evalmesh, so it builds static for a FROM scratch image (cmd/react).
package react

import (
	"bytes"
	"encoding/csv"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"
)

// MaxSteps bounds the Thought/Action turns before the agent gives up.
const MaxSteps = 8

// Meta is the part of task.yaml the agent reads.
type Meta struct {
	Name       string `yaml:"name"`
	Submission struct {
		File   string   `yaml:"file"`
		Header []string `yaml:"header"`
		Rows   int      `yaml:"rows"`
	} `yaml:"submission"`
}

// Message is one chat message.
type Message struct {
	Role    string `json:"role"`
	Content string `json:"content"`
}

// Client is an OpenAI chat-completions client.
type Client struct {
	BaseURL, Model, APIKey string
	HTTP                   *http.Client
}

// Chat sends the conversation and returns the assistant's reply.
func (c *Client) Chat(msgs []Message) (string, error) {
	body, _ := json.Marshal(map[string]any{"model": c.Model, "messages": msgs, "temperature": 0})
	req, err := http.NewRequest("POST", strings.TrimSuffix(c.BaseURL, "/")+"/chat/completions", bytes.NewReader(body))
	if err != nil {
		return "", err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+c.APIKey)
	resp, err := c.HTTP.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, 8<<20))
	if err != nil {
		return "", err
	}
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("chat completions: %s: %s", resp.Status, bytes.TrimSpace(data))
	}
	var out struct {
		Choices []struct {
			Message Message `json:"message"`
		} `json:"choices"`
	}
	if err := json.Unmarshal(data, &out); err != nil || len(out.Choices) == 0 {
		return "", fmt.Errorf("chat completions: unreadable reply %.200q", data)
	}
	return out.Choices[0].Message.Content, nil
}

func env(name, def string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return def
}

var (
	actionRE = regexp.MustCompile(`(?m)^Action:\s*(list_files|read_file)\[(.*)\]\s*$`)
	finalRE  = regexp.MustCompile(`(?s)Final Answer:\s*(\{.*\})`)
)

// Main runs the agent and returns its exit status.
func Main(log io.Writer) int {
	if err := run(log); err != nil {
		fmt.Fprintln(log, "react:", err)
		return 1
	}
	return 0
}

func run(log io.Writer) error {
	pub := env("EVALMESH_PUBLIC", "/public")
	out := env("EVALMESH_OUTPUT", "/output")
	metaData, err := os.ReadFile(env("EVALMESH_TASK_META", "/task/task.yaml"))
	if err != nil {
		return fmt.Errorf("task.yaml: %w", err)
	}
	var meta Meta
	if err := yaml.Unmarshal(metaData, &meta); err != nil {
		return fmt.Errorf("task.yaml: %w", err)
	}
	if meta.Submission.File == "" {
		meta.Submission.File = "submission.csv"
	}
	prompt, _ := os.ReadFile(env("EVALMESH_PROMPT", "/task/prompt.md"))
	test := findTest(pub)
	rows := meta.Submission.Rows
	if rows == 0 && test != nil {
		rows = len(test) - 1
	}
	header := meta.Submission.Header
	if len(header) == 0 && test != nil {
		header = test[0]
	}
	if len(header) == 0 {
		return errors.New("task.yaml names no submission header and the task has no test CSV to take one from")
	}
	c := &Client{
		BaseURL: env("OPENAI_BASE_URL", "http://127.0.0.1:8000/v1"),
		Model:   env("OPENAI_MODEL", env("EVALMESH_MODEL", "standin")),
		APIKey:  env("OPENAI_API_KEY", "none"),
		HTTP:    &http.Client{Timeout: 10 * time.Minute},
	}
	msgs := []Message{
		{Role: "system", Content: "You are a research agent. Work in turns: a line 'Thought: ...' then either 'Action: list_files[DIR]' or 'Action: read_file[FILE]' (under " + pub + "), or 'Final Answer: {JSON}' mapping each submission column to the value to predict."},
		{Role: "user", Content: fmt.Sprintf("%s\n\nTask: %s\nSubmission file: %s\nSubmission header: %s\nSubmission rows: %d\n",
			strings.TrimSpace(string(prompt)), meta.Name, meta.Submission.File, strings.Join(header, ","), rows)},
	}
	var answer map[string]any
	for step := 0; step < MaxSteps && answer == nil; step++ {
		reply, err := c.Chat(msgs)
		if err != nil {
			return err
		}
		fmt.Fprintf(log, "step %d: %s\n", step+1, reply)
		msgs = append(msgs, Message{Role: "assistant", Content: reply})
		if m := finalRE.FindStringSubmatch(reply); m != nil {
			if err := json.Unmarshal([]byte(m[1]), &answer); err != nil {
				msgs = append(msgs, Message{Role: "user", Content: "Observation: the final answer is not a JSON object: " + err.Error()})
				answer = nil
			}
			continue
		}
		obs := "no action found; use Action: list_files[DIR], Action: read_file[FILE] or Final Answer: {JSON}"
		if m := actionRE.FindStringSubmatch(reply); m != nil {
			obs = act(pub, m[1], strings.TrimSpace(m[2]))
		}
		msgs = append(msgs, Message{Role: "user", Content: "Observation: " + obs})
	}
	if answer == nil {
		return fmt.Errorf("no final answer after %d steps", MaxSteps)
	}
	return write(filepath.Join(out, meta.Submission.File), header, rows, test, answer)
}

// act carries out one action, confined to the public folder.
func act(pub, action, arg string) string {
	p := filepath.Clean(arg)
	if !filepath.IsAbs(p) {
		p = filepath.Join(pub, p)
	}
	if rel, err := filepath.Rel(pub, p); err != nil || strings.HasPrefix(rel, "..") {
		return "only files under " + pub + " can be read"
	}
	switch action {
	case "list_files":
		var names []string
		filepath.WalkDir(p, func(path string, d fs.DirEntry, err error) error {
			if err == nil && len(names) < 200 {
				rel, _ := filepath.Rel(pub, path)
				names = append(names, rel)
			}
			return nil
		})
		return strings.Join(names, "\n")
	default:
		f, err := os.Open(p)
		if err != nil {
			return err.Error()
		}
		defer f.Close()
		b, _ := io.ReadAll(io.LimitReader(f, 4096))
		return string(b)
	}
}

// findTest reads the task's test inputs as CSV: public/test.csv, or the first CSV under
// public/test/ (an imported AIRS-Bench bundle). nil when there is none.
func findTest(pub string) [][]string {
	candidates := []string{filepath.Join(pub, "test.csv")}
	var more []string
	filepath.WalkDir(filepath.Join(pub, "test"), func(path string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() && strings.HasSuffix(path, ".csv") {
			more = append(more, path)
		}
		return nil
	})
	sort.Strings(more)
	for _, p := range append(candidates, more...) {
		data, err := os.ReadFile(p)
		if err != nil {
			continue
		}
		recs, err := csv.NewReader(bytes.NewReader(data)).ReadAll()
		if err == nil && len(recs) > 0 {
			return recs
		}
	}
	return nil
}

// write writes the submission: header, rows rows; a column the test file has is copied
// from it row by row, the others take the model's value (or "0").
func write(path string, header []string, rows int, test [][]string, answer map[string]any) error {
	col := map[string]int{}
	if test != nil && len(test)-1 == rows {
		for i, h := range test[0] {
			col[h] = i
		}
	}
	recs := [][]string{header}
	for r := 0; r < rows; r++ {
		rec := make([]string, len(header))
		for i, h := range header {
			if j, ok := col[h]; ok && j < len(test[r+1]) {
				rec[i] = test[r+1][j]
				continue
			}
			rec[i] = "0"
			switch v := answer[h].(type) {
			case string:
				rec[i] = v
			case float64:
				rec[i] = strconv.FormatFloat(v, 'g', -1, 64)
			case bool:
				rec[i] = strconv.FormatBool(v)
			}
		}
		recs = append(recs, rec)
	}
	var b bytes.Buffer
	w := csv.NewWriter(&b)
	if err := w.WriteAll(recs); err != nil {
		return err
	}
	return os.WriteFile(path, b.Bytes(), 0o644)
}
