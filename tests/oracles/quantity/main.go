// Command quantity parses each string with the pinned k8s.io/apimachinery's resource.ParseQuantity, the parser
// every Kubernetes component uses, so tests/unit/test_quantity.py can compare gpugen's parser with it.
//
//	quantity < inputs.json > results.json
//
// inputs.json: ["480Gi", "+1", ...]; results.json: one object per input, in order:
// {"input", "ok", "error", "exact" (the value as a decimal, from AsDec), "value" (Value(): the int64 components
// read, rounded up), "canonical" (String())}.
package main

import (
	"encoding/json"
	"os"

	"k8s.io/apimachinery/pkg/api/resource"
)

type result struct {
	Input     string `json:"input"`
	OK        bool   `json:"ok"`
	Error     string `json:"error,omitempty"`
	Exact     string `json:"exact,omitempty"`
	Value     int64  `json:"value"`
	Canonical string `json:"canonical,omitempty"`
}

func main() {
	var inputs []string
	if err := json.NewDecoder(os.Stdin).Decode(&inputs); err != nil {
		panic(err)
	}
	results := make([]result, 0, len(inputs))
	for _, input := range inputs {
		q, err := resource.ParseQuantity(input)
		if err != nil {
			results = append(results, result{Input: input, Error: err.Error()})
			continue
		}
		results = append(results, result{Input: input, OK: true, Exact: q.AsDec().String(), Value: q.Value(),
			Canonical: q.String()})
	}
	if err := json.NewEncoder(os.Stdout).Encode(results); err != nil {
		panic(err)
	}
}
