// Command promqlparse parses PromQL expressions with Prometheus' own parser (promql/parser of the pinned
// Prometheus module), with the options a default Prometheus server runs with: no experimental functions, no
// unquoted UTF-8 names.
//
//	promqlparse < expressions.json > results.json
//
// expressions.json: [{"id", "expression"}]. results.json: [{"id", "error", "type", "selectors", "strings"}], one per
// expression in order: error is empty when the expression parses; type is the expression's value type
// (vector, scalar, matrix, string); selectors are its vector selectors, each with the metric name and the label
// names it uses: those of its matchers and the grouping labels of the nearest aggregation above it (so `max by
// (a)` over a selector without label a shows up as a selector using a). An aggregation grouping by a label that
// the aggregation below it has already dropped (`max by (a) (sum by (b) (...))`) is an error too: it parses, but
// every series would have an empty `a`.
package main

import (
	"encoding/json"
	"fmt"
	"os"
	"sort"

	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/promql/parser"
)

type expression struct {
	ID         string `json:"id"`
	Expression string `json:"expression"`
}

type selector struct {
	Metric string   `json:"metric"`
	Labels []string `json:"labels"`
}

type result struct {
	ID        string     `json:"id"`
	Error     string     `json:"error"`
	Type      string     `json:"type"`
	Selectors []selector `json:"selectors"`
	// Strings are the values the expression's string literals and label matchers hold, in the order they appear:
	// what a string written into the query reads as once parsed.
	Strings []string `json:"strings"`
}

// strings lists the value of every string literal and label matcher of expr (the metric name's excepted).
func strings_(expr parser.Expr) []string {
	found := []string{}
	parser.Inspect(expr, func(node parser.Node, _ []parser.Node) error {
		switch n := node.(type) {
		case *parser.StringLiteral:
			found = append(found, n.Val)
		case *parser.VectorSelector:
			for _, m := range n.LabelMatchers {
				if m.Name != labels.MetricName {
					found = append(found, m.Value)
				}
			}
		}
		return nil
	})
	return found
}

func selectors(expr parser.Expr) []selector {
	found := []selector{}
	parser.Inspect(expr, func(node parser.Node, path []parser.Node) error {
		vs, ok := node.(*parser.VectorSelector)
		if !ok {
			return nil
		}
		used := map[string]bool{}
		for _, m := range vs.LabelMatchers {
			if m.Name != labels.MetricName {
				used[m.Name] = true
			}
		}
		if agg := nearestAggregation(path); agg != nil && !agg.Without {
			for _, name := range agg.Grouping {
				used[name] = true
			}
		}
		names := make([]string, 0, len(used))
		for name := range used {
			names = append(names, name)
		}
		sort.Strings(names)
		found = append(found, selector{Metric: vs.Name, Labels: names})
		return nil
	})
	return found
}

// nearestAggregation is the innermost aggregation in path (the nodes above a node, outermost first), or nil.
func nearestAggregation(path []parser.Node) *parser.AggregateExpr {
	for i := len(path) - 1; i >= 0; i-- {
		if agg, ok := path[i].(*parser.AggregateExpr); ok {
			return agg
		}
	}
	return nil
}

// droppedLabels finds aggregations that group by a label the aggregation directly below them (through
// functions, not through binary operations, which may join labels back) has already dropped.
func droppedLabels(expr parser.Expr) error {
	var problem error
	parser.Inspect(expr, func(node parser.Node, path []parser.Node) error {
		inner, ok := node.(*parser.AggregateExpr)
		if !ok || inner.Without || problem != nil {
			return nil
		}
		kept := map[string]bool{}
		for _, name := range inner.Grouping {
			kept[name] = true
		}
		for i := len(path) - 1; i >= 0; i-- {
			switch above := path[i].(type) {
			case *parser.BinaryExpr:
				return nil
			case *parser.AggregateExpr:
				if above.Without {
					return nil
				}
				for _, name := range above.Grouping {
					if !kept[name] {
						problem = fmt.Errorf("%s groups by %q, which %s has already dropped", above.Op, name, inner.String())
					}
				}
				return nil
			}
		}
		return nil
	})
	return problem
}

func main() {
	var expressions []expression
	if err := json.NewDecoder(os.Stdin).Decode(&expressions); err != nil {
		fmt.Fprintln(os.Stderr, "error:", err)
		os.Exit(1)
	}
	p := parser.NewParser(parser.Options{})
	results := []result{}
	for _, e := range expressions {
		r := result{ID: e.ID, Selectors: []selector{}, Strings: []string{}}
		expr, err := p.ParseExpr(e.Expression)
		if err == nil {
			err = droppedLabels(expr)
		}
		if err != nil {
			r.Error = err.Error()
		} else {
			r.Type = string(expr.Type())
			r.Selectors = selectors(expr)
			r.Strings = strings_(expr)
		}
		results = append(results, r)
	}
	out := json.NewEncoder(os.Stdout)
	out.SetIndent("", " ")
	if err := out.Encode(results); err != nil {
		fmt.Fprintln(os.Stderr, "error:", err)
		os.Exit(1)
	}
}
