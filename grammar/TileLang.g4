// TileLang: the Python subset that @triton.jit functions are written in.
//
// The grammar is Python's own statement and expression structure, one rule per
// precedence level, so the parse tree already encodes precedence and the AST
// builder (src/parse/AstBuilder.cpp) never re-associates anything. It also
// accepts the Python constructs a jit function may NOT use (lambda, with, try,
// class, global, comprehensions, ...): parsing them lets the builder report
// "X is not supported in a @triton.jit function" at the construct, instead of
// a vague syntax error somewhere after it.
//
// INDENT, DEDENT and the NEWLINE tokens the parser sees come from
// src/parse/IndentTokenSource.cpp, which wraps the generated lexer: it drops
// line breaks inside brackets (implicit line joining), collapses blank and
// comment-only lines, and turns changes of indentation into INDENT/DEDENT.
grammar TileLang;

tokens { INDENT, DEDENT }

// ---------------------------------------------------------------- entry points
// The module scanner (src/parse/ModuleScanner.cpp) cuts a file into chunks and
// parses each with the entry point for its kind.

function_chunk : NEWLINE* funcdef NEWLINE* EOF ;
import_chunk   : NEWLINE* import_stmt NEWLINE* EOF ;
constant_chunk : NEWLINE* expr_stmt NEWLINE* EOF ;

// ------------------------------------------------------------------ functions

funcdef    : 'def' NAME parameters ('->' test)? ':' suite ;
parameters : '(' (param (',' param)* ','?)? ')' ;
param      : NAME (':' test)? ('=' test)?    # plainParam
           | '*' NAME?                        # starParam
           | '**' NAME                        # doubleStarParam
           | '/'                              # slashParam
           ;

suite : simple_stmts
      | NEWLINE INDENT stmt+ DEDENT
      ;

// ----------------------------------------------------------------- statements

stmt : simple_stmts
     | compound_stmt
     ;

simple_stmts : simple_stmt (';' simple_stmt)* ';'? NEWLINE ;

simple_stmt : expr_stmt                                  # exprStmtAlt
            | 'pass'                                   # passStmt_
            | 'break'                                  # breakStmt
            | 'continue'                               # continueStmt
            | 'return' testlist_star?                  # returnStmt
            | 'assert' test (',' test)?                # assertStmt
            | 'global' NAME (',' NAME)*                # globalStmt
            | 'nonlocal' NAME (',' NAME)*              # nonlocalStmt
            | 'del' exprlist                           # delStmt
            | 'raise' (test ('from' test)?)?           # raiseStmt
            | import_stmt                              # importStmtInBody
            | yield_expr                               # yieldStmt
            ;

// Assignment forms. `a = b = c` has several targets; the last testlist is the value.
expr_stmt : testlist_star (':' test ('=' testlist_star)?)        # annAssign
          | testlist_star augassign testlist_star                  # augAssign
          | testlist_star ('=' (testlist_star | yield_expr))*      # assignOrExpr
          | testlist_star ':=' test                                # walrusStmt
          ;

augassign : '+=' | '-=' | '*=' | '@=' | '/=' | '%=' | '&=' | '|=' | '^='
          | '<<=' | '>>=' | '**=' | '//=' ;

import_stmt : 'import' dotted_as_name (',' dotted_as_name)*                        # importName
            | 'from' ('.' | '...')* dotted_name? 'import'
              ('*' | '(' import_as_names ','? ')' | import_as_names)               # importFrom
            ;
dotted_as_name  : dotted_name ('as' NAME)? ;
import_as_names : import_as_name (',' import_as_name)* ;
import_as_name  : NAME ('as' NAME)? ;
dotted_name     : NAME ('.' NAME)* ;

compound_stmt : if_stmt
              | while_stmt
              | for_stmt
              | funcdef
              | decorator+ (funcdef | classdef)
              | classdef
              | with_stmt
              | try_stmt
              | async_stmt
              ;

if_stmt    : 'if' namedexpr_test ':' suite elif_clause* else_clause? ;
elif_clause: 'elif' namedexpr_test ':' suite ;
else_clause: 'else' ':' suite ;
while_stmt : 'while' namedexpr_test ':' suite else_clause? ;
for_stmt   : 'for' exprlist 'in' testlist ':' suite else_clause? ;

// Unsupported in jit code; parsed only to be reported precisely.
decorator  : '@' test NEWLINE ;
classdef   : 'class' NAME ('(' arglist? ')')? ':' suite ;
with_stmt  : 'with' with_item (',' with_item)* ':' suite ;
with_item  : test ('as' expr)? ;
try_stmt   : 'try' ':' suite (except_clause ':' suite)* else_clause? ('finally' ':' suite)? ;
except_clause : 'except' (test ('as' NAME)?)? ;
async_stmt : 'async' (funcdef | with_stmt | for_stmt) ;

// ---------------------------------------------------------------- expressions
// One rule per precedence level, lowest first.

testlist_star : (test | star_expr) (',' (test | star_expr))* ','? ;
testlist      : test (',' test)* ','? ;
exprlist      : (expr | star_expr) (',' (expr | star_expr))* ','? ;
star_expr     : '*' expr ;

// `name := value` where Python allows it unparenthesised; rejected by the builder.
namedexpr_test : (NAME ':=')? test ;

test     : or_test ('if' or_test 'else' test)?
         | lambdef
         ;
lambdef  : 'lambda' (lambda_param (',' lambda_param)* ','?)? ':' test ;
lambda_param : NAME ('=' test)? | '*' NAME? | '**' NAME ;
or_test  : and_test ('or' and_test)* ;
and_test : not_test ('and' not_test)* ;
not_test : 'not' not_test
         | comparison
         ;
comparison : expr (comp_op expr)* ;
comp_op    : '<' | '>' | '==' | '>=' | '<=' | '!=' | 'in' | 'not' 'in' | 'is' | 'is' 'not' ;

expr       : xor_expr ('|' xor_expr)* ;
xor_expr   : and_expr ('^' and_expr)* ;
and_expr   : shift_expr ('&' shift_expr)* ;
shift_expr : arith_expr (shift_op arith_expr)* ;
shift_op   : '<<' | '>>' ;
arith_expr : term (arith_op term)* ;
arith_op   : '+' | '-' ;
term       : factor (term_op factor)* ;
term_op    : '*' | '@' | '/' | '%' | '//' ;
factor     : unary_op factor
           | power
           ;
unary_op   : '+' | '-' | '~' ;
power      : atom_expr ('**' factor)? ;
atom_expr  : atom trailer* ;

atom : '(' (yield_expr | testlist_comp)? ')'    # parenAtom
     | '[' testlist_comp? ']'                   # listAtom
     | '{' dictorsetmaker? '}'                  # dictAtom
     | NAME                                     # nameAtom
     | NUMBER                                   # numberAtom
     | STRING+                                  # stringAtom
     | '...'                                    # ellipsisAtom
     | 'None'                                   # noneAtom
     | 'True'                                   # trueAtom
     | 'False'                                  # falseAtom
     ;

testlist_comp : (namedexpr_test | star_expr) (comp_for | (',' (namedexpr_test | star_expr))* ','?) ;
dictorsetmaker : (test ':' test | '**' expr | test | star_expr)
                 (comp_for | (',' (test ':' test | '**' expr | test | star_expr))* ','?) ;
comp_for  : 'async'? 'for' exprlist 'in' or_test (comp_for | comp_if)? ;
comp_if   : 'if' test (comp_for | comp_if)? ;
yield_expr: 'yield' ('from' test | testlist_star)? ;

trailer : '(' arglist? ')'          # callTrailer
        | '[' subscriptlist ']'     # subscriptTrailer
        | '.' NAME                  # attributeTrailer
        ;
subscriptlist : subscript (',' subscript)* ','? ;
subscript : test                              # indexSubscript
          | lower=test? ':' upper=test? (':' step=test?)?   # sliceSubscript
          ;
arglist  : argument (',' argument)* ','? ;
argument : NAME '=' test            # keywordArgument
         | test comp_for?           # positionalArgument
         | '**' test                # doubleStarArgument
         | '*' test                 # starArgument
         ;

// ---------------------------------------------------------------------- lexer

NUMBER
    : DIGITS_PART IMAG_SUFFIX?
    | '0' [xX] ('_'? HEX_DIGIT)+
    | '0' [oO] ('_'? [0-7])+
    | '0' [bB] ('_'? [01])+
    | FLOAT_NUMBER IMAG_SUFFIX?
    ;

fragment DIGITS_PART  : DIGIT ('_'? DIGIT)* ;
fragment FLOAT_NUMBER : DIGITS_PART? '.' DIGITS_PART EXPONENT?
                      | DIGITS_PART '.' EXPONENT?
                      | DIGITS_PART EXPONENT
                      ;
fragment EXPONENT     : [eE] [+-]? DIGITS_PART ;
fragment IMAG_SUFFIX  : [jJ] ;
fragment DIGIT        : [0-9] ;
fragment HEX_DIGIT    : [0-9a-fA-F] ;

STRING
    : STRING_PREFIX? ( '\'\'\'' LONG_CHAR*? '\'\'\''
                     | '"""' LONG_CHAR*? '"""'
                     | '\'' (ESCAPE | ~[\\\r\n'])* '\''
                     | '"' (ESCAPE | ~[\\\r\n"])* '"'
                     )
    ;

// A quote that is not closed on its line: one token, so the parser glue can
// say "unterminated string literal" at the quote.
UNTERMINATED_STRING
    : STRING_PREFIX? ( '\'' (ESCAPE | ~[\\\r\n'])*
                     | '"' (ESCAPE | ~[\\\r\n"])*
                     )
    ;

fragment STRING_PREFIX : [rRbBuUfF] | [rR][bBfF] | [bBfF][rR] ;
fragment LONG_CHAR     : ESCAPE | ~'\\' ;
fragment ESCAPE        : '\\' . ;

NAME : [a-zA-Z_] [a-zA-Z_0-9]* ;

NEWLINE : ( '\r'? '\n' | '\r' ) [ \t\f]* ;

SKIP_SPACE        : [ \t\f]+ -> skip ;
COMMENT           : '#' ~[\r\n\f]* -> skip ;
// Hidden, not skipped: the token source must see a continuation that ends the input.
LINE_CONTINUATION : '\\' [ \t]* ( '\r'? '\n' | '\r' ) -> channel(HIDDEN) ;

// Any other character: a token of its own, reported as "invalid character"
// by the parser glue (never a lexer exception).
INVALID_CHAR : . ;
