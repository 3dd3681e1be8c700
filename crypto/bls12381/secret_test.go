package bls12381

import (
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// secretCode lists the functions and methods that receive a secret scalar
// (a key share, a DKG polynomial coefficient, a Schnorr or DH key): each
// must reach circl only, never gnark-crypto (which documents no constant
// time) or math/big (whose arithmetic is variable time). Keys are
// "Receiver.Method" or "Func".
var secretCode = []string{
	"Sign", "SignShare", "toScalar",
	"G1Point.Mul", "G2Point.Mul", "GTPoint.Mul",
	"Scalar.Set", "Scalar.Clone", "Scalar.Add", "Scalar.Sub", "Scalar.Neg",
	"Scalar.Mul", "Scalar.Div", "Scalar.Inv", "Scalar.Pick", "Scalar.SetBytes",
	"Scalar.Equal", "Scalar.MarshalBinary", "Scalar.UnmarshalBinary",
	"Scalar.MarshalTo", "Scalar.UnmarshalFrom", "reduce",
}

// forbidden are the package names a secret path must not use.
var forbidden = []string{"gnark", "big", "fr", "fp"}

// TestSecretPathsUseCirclOnly reads this package's sources and checks that
// no function that handles a secret scalar refers to gnark-crypto or
// math/big, directly or through another function of this package. It is
// the guard behind SECURITY.md's constant-time row: a refactor that routes
// signing or a scalar operation through the fast verification library
// fails here.
func TestSecretPathsUseCirclOnly(t *testing.T) {
	fset := token.NewFileSet()
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	funcs := map[string]*ast.FuncDecl{}
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range f.Decls {
			if fd, ok := d.(*ast.FuncDecl); ok {
				funcs[funcKey(fd)] = fd
			}
		}
	}
	for _, name := range secretCode {
		fd, ok := funcs[name]
		if !ok {
			t.Errorf("%s: not found; update secretCode", name)
			continue
		}
		seen := map[string]bool{}
		var walk func(key string, fd *ast.FuncDecl, path []string)
		walk = func(key string, fd *ast.FuncDecl, path []string) {
			if seen[key] {
				return
			}
			seen[key] = true
			path = append(path, key)
			ast.Inspect(fd.Body, func(n ast.Node) bool {
				switch x := n.(type) {
				case *ast.SelectorExpr:
					if id, ok := x.X.(*ast.Ident); ok && slices.Contains(forbidden, id.Name) {
						t.Errorf("%s uses %s.%s (via %s)", name, id.Name, x.Sel.Name, strings.Join(path, " → "))
					}
				case *ast.CallExpr:
					// Follow calls to this package's plain functions.
					if id, ok := x.Fun.(*ast.Ident); ok {
						if callee, ok := funcs[id.Name]; ok {
							walk(id.Name, callee, path)
						}
					}
				}
				return true
			})
		}
		walk(name, fd, nil)
	}
}

// funcKey names a declaration as secretCode does.
func funcKey(fd *ast.FuncDecl) string {
	if fd.Recv == nil || len(fd.Recv.List) == 0 {
		return fd.Name.Name
	}
	typ := fd.Recv.List[0].Type
	if s, ok := typ.(*ast.StarExpr); ok {
		typ = s.X
	}
	if id, ok := typ.(*ast.Ident); ok {
		return id.Name + "." + fd.Name.Name
	}
	return fd.Name.Name
}
