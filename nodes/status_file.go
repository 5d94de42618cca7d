package nodes

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
)

// StatusFile is status.json (spec appendix C): what a node's stage
// directory says about its outcome. Agents may write it to steer routing.
type StatusFile struct {
	Outcome          string            `json:"outcome"`
	PreferredLabel   string            `json:"preferred_label,omitempty"`
	SuggestedNextIDs []string          `json:"suggested_next_ids,omitempty"`
	ContextUpdates   map[string]string `json:"context_updates,omitempty"`
	Notes            string            `json:"notes,omitempty"`
	FailureReason    string            `json:"failure_reason,omitempty"`
	// Legacy name of preferred_label.
	PreferredNextLabel string `json:"preferred_next_label,omitempty"`
}

// ReadStatusFile reads dir/status.json; ok is false when there is none.
func ReadStatusFile(dir string) (*StatusFile, bool, error) {
	data, err := os.ReadFile(filepath.Join(dir, "status.json"))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, err
	}
	var raw struct {
		StatusFile
		Context map[string]any `json:"context_updates"`
	}
	if err := json.Unmarshal(data, &raw); err != nil {
		return nil, false, fmt.Errorf("status.json: %v", err)
	}
	sf := raw.StatusFile
	sf.ContextUpdates = map[string]string{}
	for k, v := range raw.Context {
		if s, ok := v.(string); ok {
			sf.ContextUpdates[k] = s
		} else {
			b, _ := json.Marshal(v)
			sf.ContextUpdates[k] = string(b)
		}
	}
	if sf.Outcome == "" {
		return nil, false, errors.New("status.json: the outcome field is required")
	}
	if sf.PreferredLabel == "" {
		sf.PreferredLabel = sf.PreferredNextLabel
	}
	return &sf, true, nil
}

// Outcome turns the file into an outcome.
func (sf *StatusFile) outcome() *Outcome {
	return &Outcome{Status: ParseStatus(sf.Outcome), PreferredLabel: sf.PreferredLabel,
		SuggestedNextIDs: sf.SuggestedNextIDs, ContextUpdates: sf.ContextUpdates,
		Notes: sf.Notes, FailureReason: sf.FailureReason}
}

// WriteStatusFile writes the outcome as dir/status.json.
func WriteStatusFile(dir string, o *Outcome) error {
	if dir == "" {
		return nil
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	sf := StatusFile{Outcome: string(o.Status), PreferredLabel: o.PreferredLabel,
		SuggestedNextIDs: o.SuggestedNextIDs, ContextUpdates: o.ContextUpdates, Notes: o.Notes,
		FailureReason: o.FailureReason}
	data, err := json.MarshalIndent(sf, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, "status.json"), data, 0o644)
}

func writeStage(dir, name, text string) error {
	if dir == "" {
		return nil
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, name), []byte(text), 0o644)
}
