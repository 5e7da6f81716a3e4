// Command celparse parses CEL expressions with cel-go's parser (the version the pinned Kyverno builds with),
// optional syntax (`.?field`, `[?key]`) and the standard macros enabled, as Kyverno's CEL environment has them:
//
//	celparse < expressions.json > errors.json
//
// expressions.json: [{"id", "expression"}]; errors.json: [{"id", "error"}] for each expression that does not
// parse (empty when all do). Parsing is the grammar alone; type checking is what Kyverno's compiler does when
// the CLI and the engine harness load the policies.
package main

import (
	"encoding/json"
	"fmt"
	"os"

	"github.com/google/cel-go/common"
	"github.com/google/cel-go/parser"
)

type expression struct {
	ID         string `json:"id"`
	Expression string `json:"expression"`
}

type failure struct {
	ID    string `json:"id"`
	Error string `json:"error"`
}

func main() {
	var expressions []expression
	if err := json.NewDecoder(os.Stdin).Decode(&expressions); err != nil {
		fmt.Fprintln(os.Stderr, "error:", err)
		os.Exit(1)
	}
	p, err := parser.NewParser(parser.EnableOptionalSyntax(true), parser.Macros(parser.AllMacros...))
	if err != nil {
		fmt.Fprintln(os.Stderr, "error:", err)
		os.Exit(1)
	}
	failures := []failure{}
	for _, e := range expressions {
		if _, errs := p.Parse(common.NewTextSource(e.Expression)); len(errs.GetErrors()) > 0 {
			failures = append(failures, failure{ID: e.ID, Error: errs.ToDisplayString()})
		}
	}
	out := json.NewEncoder(os.Stdout)
	out.SetIndent("", " ")
	if err := out.Encode(failures); err != nil {
		fmt.Fprintln(os.Stderr, "error:", err)
		os.Exit(1)
	}
}
